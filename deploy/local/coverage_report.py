"""Prints line coverage per module from the JSON `swift test --enable-code-coverage` exports.

Modules are the project's own source folders (Shared/X, Services/X, Tools/X); dependencies and tests are left out.
Exits 1 if a module is under the threshold given by COVERAGE_MINIMUM (percent, default: report only).
"""
import json
import os
import sys


def module_of(path: str, root: str) -> str | None:
    relative = os.path.relpath(path, root)
    parts = relative.split(os.sep)
    if len(parts) >= 3 and parts[0] in ("Shared", "Services", "Tools"):
        return f"{parts[0]}/{parts[1]}"
    return None


def main() -> int:
    report_path = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(report_path) as handle:
        report = json.load(handle)
    totals: dict[str, list[int]] = {}
    for entry in report["data"]:
        for file in entry["files"]:
            module = module_of(file["filename"], root)
            if module is None:
                continue
            lines = file["summary"]["lines"]
            total = totals.setdefault(module, [0, 0])
            total[0] += lines["covered"]
            total[1] += lines["count"]
    minimum = float(os.environ.get("COVERAGE_MINIMUM", "0"))
    failed = False
    all_covered = sum(covered for covered, _ in totals.values())
    all_lines = sum(count for _, count in totals.values())
    print(f"\n{'module':32} {'lines':>8} {'covered':>8} {'coverage':>9}")
    for module in sorted(totals):
        covered, count = totals[module]
        percent = 100.0 * covered / count if count else 100.0
        flag = "" if percent >= minimum else "  < minimum"
        failed |= percent < minimum
        print(f"{module:32} {count:8d} {covered:8d} {percent:8.1f}%{flag}")
    if all_lines:
        print(f"{'all':32} {all_lines:8d} {all_covered:8d} {100.0 * all_covered / all_lines:8.1f}%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
