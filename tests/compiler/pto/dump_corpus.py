"""Write every conformance-corpus kernel's .pto to OUTDIR/<name>.pto:

    python -m tests.compiler.pto.dump_corpus OUTDIR [NAME ...]
    ../shared/pto-oracle/pto-oracle check OUTDIR/*.pto

Only the named kernels with NAMEs. A kernel that does not compile is reported on stderr (its
file is removed, so no stale text is checked) and makes the exit status 1.
"""
import sys
import time
from pathlib import Path

from . import corpus


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    unknown = [n for n in argv[1:] if n not in corpus.BY_NAME]
    if unknown:
        print(f"unknown corpus kernels: {', '.join(unknown)}", file=sys.stderr)
        return 2
    entries = [corpus.BY_NAME[n] for n in argv[1:]] or [e for e in corpus.CORPUS if not e.refused]
    t0 = time.perf_counter()
    failed = 0
    for entry in entries:
        path = out / f"{entry.name}.pto"
        try:
            text = entry.build()
        except Exception as e:      # noqa: BLE001
            failed += 1
            path.unlink(missing_ok=True)
            print(f"{entry.name}: does not compile: {type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
            continue
        path.write_text(text)
    print(f"wrote {len(entries) - failed} .pto files to {out} in "
          f"{time.perf_counter() - t0:.1f}s" + (f"; {failed} did not compile" if failed else ""),
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
