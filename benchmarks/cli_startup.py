"""Start-up time of the command line: `capeval --help`, `capeval --version` and one command's help, each in a fresh
interpreter (median of ``--repeats`` runs), and whether the top-level help imported any model code.

    python benchmarks/cli_startup.py --repeats 5
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

PROBE = ("import sys\nfrom capeval.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
         "print('MODEL_CODE', any(m.split('.')[0] in ('torch', 'transformers', 'open_clip') for m in sys.modules),"
         " file=sys.stderr)\n")


def timed(argv, repeats):
    seconds, model_code = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True)
        seconds.append(time.perf_counter() - start)
        model_code = "MODEL_CODE True" in out.stderr
    return {"median_s": round(statistics.median(seconds), 3), "imports_model_code": model_code}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps({" ".join(["capeval", *argv]): timed(argv, args.repeats)
                      for argv in (["--help"], ["--version"], ["score", "--help"])}, indent=2))


if __name__ == "__main__":
    main()
