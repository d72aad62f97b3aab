/// Splits a SQL script into statements at top-level semicolons, respecting quotes, dollar-quoted bodies
/// (`$$ ... $$`, `$fn$ ... $fn$`) and comments, so migration files can hold several statements and functions.
package enum SQLScript {
    package static func statements(in script: String) -> [String] {
        var statements: [String] = []
        var current: [Character] = []
        let characters = Array(script)
        var index = 0

        func flush() {
            let text = String(current).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty, !isOnlyComments(text) { statements.append(text) }
            current.removeAll(keepingCapacity: true)
        }

        while index < characters.count {
            let character = characters[index]
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            switch character {
            case "-" where next == "-":
                while index < characters.count, characters[index] != "\n" {
                    current.append(characters[index])
                    index += 1
                }
                continue
            case "/" where next == "*":
                var depth = 0
                repeat {
                    if characters[index] == "/", index + 1 < characters.count, characters[index + 1] == "*" {
                        depth += 1
                        current.append(contentsOf: "/*")
                        index += 2
                    } else if characters[index] == "*", index + 1 < characters.count, characters[index + 1] == "/" {
                        depth -= 1
                        current.append(contentsOf: "*/")
                        index += 2
                    } else {
                        current.append(characters[index])
                        index += 1
                    }
                } while depth > 0 && index < characters.count
                continue
            case "'", "\"":
                let escapesWithBackslash =
                    character == "'" && index > 0 && (characters[index - 1] == "E" || characters[index - 1] == "e")
                current.append(character)
                index += 1
                while index < characters.count {
                    let inner = characters[index]
                    current.append(inner)
                    index += 1
                    if escapesWithBackslash, inner == "\\", index < characters.count {
                        current.append(characters[index])
                        index += 1
                    } else if inner == character {
                        // A doubled quote is an escaped quote, not the end.
                        if index < characters.count, characters[index] == character {
                            current.append(character)
                            index += 1
                        } else {
                            break
                        }
                    }
                }
                continue
            case "$":
                if let tag = dollarTag(in: characters, at: index) {
                    current.append(contentsOf: tag)
                    index += tag.count
                    while index < characters.count {
                        if characters[index] == "$",
                            Array(characters[index..<min(index + tag.count, characters.count)]) == tag
                        {
                            current.append(contentsOf: tag)
                            index += tag.count
                            break
                        }
                        current.append(characters[index])
                        index += 1
                    }
                    continue
                }
            case ";":
                flush()
                index += 1
                continue
            default:
                break
            }
            current.append(character)
            index += 1
        }
        flush()
        return statements
    }

    /// `$tag$` starting at `index`, if there is one (`$1` parameters are not tags).
    private static func dollarTag(in characters: [Character], at index: Int) -> [Character]? {
        var end = index + 1
        while end < characters.count, characters[end] != "$" {
            let character = characters[end]
            guard character.isLetter || character == "_" || (character.isNumber && end > index + 1) else { return nil }
            end += 1
        }
        guard end < characters.count else { return nil }
        return Array(characters[index...end])
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        text.split(separator: "\n").allSatisfy { $0.trimmingCharacters(in: .whitespaces).hasPrefix("--") }
    }
}
