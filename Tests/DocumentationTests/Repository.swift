import Foundation

/// The checkout these tests read: its root, a document's text and the files under its source folders.
enum Repository {
    /// The checkout's root folder.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The text of the file at `path`, relative to the root.
    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Every file under `folders`, relative to the root.
    static func files(under folders: [String]) -> [URL] {
        folders.flatMap { folder in
            let files = FileManager.default.enumerator(
                at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            return (files?.allObjects as? [URL]) ?? []
        }
    }
}
