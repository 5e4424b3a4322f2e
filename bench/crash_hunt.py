"""Kill `memory ingest` or `memory import` at random points, many times over: how often does a re-run end
unlike a clean run?

tests/memory/test_crash_loops.py kills each command at 20 points of one seed, which is what CI can afford;
a window that one run in twenty hits slips through it most of the time. This runs ``--trials`` trials of
its own, each from a fresh home (or a copy of a clean one), and compares what a plain re-run leaves with
what a clean run does (rows, postings, mirror files; tests/memory/test_crash_loops.py ``_snapshot``).

A trial is one of:

- ``empty``: one ``--force`` run into an empty home, killed at a random point of a clean run's time;
- ``clean``: the same into a copy of the clean home (every row there, then overwritten);
- ``double``: two such kills, one after the other, into a copy of the clean home.

Then the plain command runs once more to its end. A run the drawn point did not reach ends by itself and
counts as a kill-free run, which must also match. Load from other work moves where the kills land: run it
beside a busy machine as well as an idle one.

Run: .venv/bin/python -m bench.crash_hunt [--command ingest|import] [--trials 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from tests.memory import test_crash_loops as loops
from tests.memory.conftest import TRANSCRIPTS

_MODES = ("empty", "clean", "double")


def _reprs(rows: object) -> set[str]:
    return {repr(r) for r in rows} if isinstance(rows, list) else {repr(rows)}


def _differences(expected: dict[str, object], got: dict[str, object]) -> list[str]:
    lines: list[str] = []
    for table, rows in expected.items():
        if rows == got[table]:
            continue
        want, have = _reprs(rows), _reprs(got[table])
        lines.append(f"{table}: {len(want - have)} row(s) only in the clean run, {len(have - want)} only after kills")
        lines += [f"  clean:  {r[:300]}" for r in sorted(want - have)[:2]]
        lines += [f"  killed: {r[:300]}" for r in sorted(have - want)[:2]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--command", choices=("ingest", "import"), default="ingest")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="macupos-crash-hunt-"))
    try:
        if args.command == "ingest":
            shutil.copytree(TRANSCRIPTS, tmp / "transcripts")
            source = loops._transcripts(tmp, tmp / "transcripts")
            forced: tuple[str, ...] = ("memory", "ingest", str(source), "--quiet", "--force")
            plain: tuple[str, ...] = ("memory", "ingest", str(source), "--quiet")
        else:
            source = loops._handoff_tree(tmp / "tree", 400)
            forced = plain = ("memory", "import", str(source))
        clean = tmp / "clean"
        first = loops._macupos(clean, *plain)
        assert first.code == 0, f"the clean run exited {first.code}"
        expected = loops._snapshot(clean)
        rng = random.Random(args.seed)
        failed = 0
        for trial in range(args.trials):
            home = tmp / f"trial-{trial}"
            mode = rng.choice(_MODES)
            if mode != "empty":
                shutil.copytree(clean, home)
            points = []
            for _ in range(2 if mode == "double" else 1):
                at = rng.uniform(0.0, first.work_s)
                outcome = loops._macupos(home, *forced, kill_after_s=at)
                points.append(f"{at:.3f} s ({'killed' if outcome.killed else f'exit {outcome.code}'})")
            end = loops._macupos(home, *plain)
            differences = [f"re-run: exit {end.code}"] if end.code else _differences(expected, loops._snapshot(home))
            print(f"trial {trial:3d} {mode:6s} {', '.join(points)}: {'DIFFERS' if differences else 'same'}", flush=True)
            if differences:
                failed += 1
                print("\n".join(differences), flush=True)
            shutil.rmtree(home, ignore_errors=True)
        print(f"{args.command}: {failed} of {args.trials} trials differ from a clean run (seed {args.seed})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
