"""Would a second engine's disagreement flag tiny.en's misheard deciding words? Moonshine base-en, measured.

Inputs: the transcripts of ``bench.voice_wer ... --doubt --dump FILE --cache DIR`` (tiny.en at whatever
setting that run used, with its evidence, so today's flags are weighed again exactly as ``--doubt`` does) and
the same clips from ``--cache``. Each clip is transcribed again by Moonshine base-en (``moonshine-cpp``,
run by bench/_moonshine_worker.py under ``--engine-python``, a separate virtualenv: nothing here imports
moonshine, so the project's venv never needs it). moonshine-cpp 0.1.4's ``MoonshineModel.transcribe(array)``
is broken (it uses ``ctypes.c_float_p``, which does not exist), so the worker calls the library's C function.

Per voice group (piper / espeak, clean / with noise), a sentence being right as in bench.voice_wer
(every deciding word in the transcript, after its normalisation):
  * whisper right, Moonshine right, either right;
  * disagreement D: a deciding word of the reference is in one transcript and not in the other (an oracle:
    it needs the reference). *caught*: D among whisper's wrong sentences; *false alarms*: among its right;
  * usable disagreement d: a deciding word of whisper's own transcript (bot.voice.doubt.deciding_positions)
    missing from Moonshine's: what the bot could compute;
  * right or flagged and flagged although right (shares of all sentences, as ``--doubt``): today's flags
    (bot.voice.doubt at the default thresholds), today's or D, today's or d;
  * Moonshine's decode time: p50 per clip, and with ``--latency10`` for 10 s clips (clean clips joined in
    order, cut at 10 s). onnxruntime picks its own thread count (no setting is exposed); pin the run with
    ``taskset`` to bound it.

Run (docs/benchmarks.md, "A second engine, measured"):
  python3 -m venv /tmp/moonvenv && /tmp/moonvenv/bin/pip install moonshine-cpp==0.1.4 numpy
  .venv/bin/python -m bench.voice_second_engine --dump /tmp/whisper_dump.pkl [--dump MORE.pkl]
      --cache /tmp/voice_clips --engine-python /tmp/moonvenv/bin/python [--latency10] [--limit N] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import hashlib
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.voice_wer import HOTWORDS, Sentence, decisive_right, doubt_figures, make_clips, normalize
from bot.voice.audio import decode_samples
from bot.voice.doubt import Thresholds, bare, deciding_positions
from bot.voice.transcribe import Transcript

WORKER = Path(__file__).with_name("_moonshine_worker.py")
RATE = 16_000  # what both engines take
BATCH = 100  # clips per worker process (see run_engine)
TEN = "10s-"  # ids of the joined 10 s clips (a clip's own id is hexadecimal)
GROUPS = {  # label → which voices of bench.voice_wer it holds
    "piper, clean": lambda v: v == "piper",
    "espeak, clean": lambda v: v.startswith("espeak") and "+snr" not in v,
    "piper, noise": lambda v: v.startswith("piper+snr"),
    "espeak, noise": lambda v: v.startswith("espeak") and "+snr" in v,
}


class _Dump(pickle.Unpickler):
    """A ``--dump`` pickle: voice_wer runs as ``__main__``, so its sentences are pickled as ``__main__.Sentence``.
    A dump made before a dataclass gained a field (``Rival.unknown``) reads with that field at its default."""

    def find_class(self, module: str, name: str) -> Any:
        cls = super().find_class("bench.voice_wer" if module == "__main__" else module, name)
        return _padded(cls) if dataclasses.is_dataclass(cls) and hasattr(cls, "__slots__") else cls


@functools.cache
def _padded(cls: type) -> type:
    """``cls`` reading a slotted dataclass's pickled state that lacks its newest fields: they take their defaults."""
    names = [f.name for f in dataclasses.fields(cls)]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}

    def setstate(self: Any, state: list[Any]) -> None:
        for name, value in zip(names, [*state, *(defaults[n] for n in names[len(state) :])], strict=True):
            object.__setattr__(self, name, value)

    return type(cls.__name__, (cls,), {"__slots__": (), "__setstate__": setstate})


def add_dump_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dump`` (repeatable) and ``--cache``: the transcripts of a voice_wer run and the clips it used."""
    parser.add_argument(
        "--dump", type=Path, action="append", required=True, help="a pickle of bench.voice_wer --doubt --dump"
    )
    parser.add_argument("--cache", type=Path, required=True, help="the clip cache that voice_wer run used")


def columns(dumps: list[Path]) -> Iterator[tuple[str, str, list[Sentence], list[Transcript]]]:
    """Each set and voice of ``dumps`` once (the first dump holding it wins): name, voice, sentences, transcripts."""
    seen: set[tuple[str, str]] = set()
    for dump in dumps:
        with dump.open("rb") as fh:
            transcripts = _Dump(fh).load()
        for (_, name, voice), (sentences, heard) in transcripts.items():
            if (name, voice) not in seen:
                seen.add((name, voice))
                yield name, voice, sentences, heard


def has(word: str, text: str) -> bool:
    """One deciding word in ``text``, by the bench's own rule."""
    return decisive_right(Sentence(word, (word,), word), text)


def flagged(sentence: Sentence, heard: Transcript) -> bool:
    """Whether today's flags (default thresholds) are raised, computed exactly as ``--doubt`` does."""
    figures = doubt_figures([sentence], [heard], Thresholds())
    # One sentence: right-or-flagged is "flagged" when it is wrong, flagged-although-right when it is right.
    return bool(figures["flagged_right"] if figures["right"] else figures["right_or_flagged"])


def usable_disagreement(whisper: str, other: str) -> bool:
    """A deciding word of whisper's transcript (as the bot finds them, without the reference) not in ``other``."""
    words = whisper.split()
    deciding = (bare(words[i]) for i in deciding_positions(words, HOTWORDS))
    return any(normalize(w) and not has(w, other) for w in deciding)  # a word normalised to nothing cannot be compared


def count(sentence: Sentence, heard: Transcript, other: str) -> Counter[str]:
    w_right, m_right = decisive_right(sentence, heard.text), decisive_right(sentence, other)
    flags = flagged(sentence, heard)
    oracle = any(has(w, heard.text) != has(w, other) for w in sentence.decisive)
    usable = usable_disagreement(heard.text, other)
    figures = dict(
        n=True,
        w_right=w_right,
        w_wrong=not w_right,
        m_right=m_right,
        either=w_right or m_right,
        caught=not w_right and oracle,
        false_alarm=w_right and oracle,
        rof=w_right or flags,
        rof_d=w_right or flags or oracle,
        rof_u=w_right or flags or usable,
        far=w_right and flags,
        far_d=w_right and (flags or oracle),
        far_u=w_right and (flags or usable),
    )
    return Counter({k: int(v) for k, v in figures.items()})


def run_engine(python: str, clips: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Each clip through the worker under ``python``; {id: {"text", "decode_s"}}."""
    out: dict[str, dict[str, Any]] = {}
    ids = list(clips)
    with tempfile.TemporaryDirectory() as tmp:
        for cid in ids:
            np.save(Path(tmp) / f"{cid}.npy", clips[cid])
        # moonshine-cpp 0.1.4 keeps about 35 MB per clip decoded (80 clips: 0.8 → 3.4 GB resident; a full run
        # in one process was killed for memory), so a fresh worker takes each batch.
        for start in range(0, len(ids), BATCH):
            jobs = Path(tmp) / "jobs.jsonl"
            lines = [
                json.dumps({"id": cid, "path": str(Path(tmp) / f"{cid}.npy")}) for cid in ids[start : start + BATCH]
            ]
            jobs.write_text("\n".join(lines) + "\n", encoding="utf-8")
            with subprocess.Popen([python, str(WORKER), str(jobs)], stdout=subprocess.PIPE, text=True) as worker:
                assert worker.stdout is not None
                for line in worker.stdout:
                    row = json.loads(line)
                    out[row.pop("id")] = row
            if worker.returncode:
                sys.exit(f"the engine's worker failed (exit {worker.returncode})")
            print(f"  {len(out)}/{len(ids)} clips", file=sys.stderr, flush=True)  # a full run takes minutes
    return out


def ten_second_clips(samples: list[np.ndarray], n: int) -> list[np.ndarray]:
    """Up to ``n`` clips of exactly 10 s: consecutive clips joined without a gap, cut at 10 s."""
    out: list[np.ndarray] = []
    pieces: list[np.ndarray] = []
    for s in samples:
        pieces.append(s)
        if sum(len(p) for p in pieces) >= 10 * RATE:
            out.append(np.concatenate(pieces)[: 10 * RATE])
            pieces = []
        if len(out) == n:
            break
    return out


def _p(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"p50": round(statistics.median(ordered), 3), "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    # (set, voice) → sentences, whisper's transcripts and the clip ids; the first dump wins on a repeat.
    rows: dict[tuple[str, str], tuple[list[Sentence], list[Transcript], list[str]]] = {}
    clips: dict[str, np.ndarray] = {}
    for name, voice, every_sentence, every_heard in columns(args.dump):
        sentences, heard = every_sentence[: args.limit or None], every_heard[: args.limit or None]
        print(f"{name} {voice} ({len(sentences)})", file=sys.stderr, flush=True)
        # The clips the dump was made from: with the same cache they are read back, not made anew.
        oggs = asyncio.run(make_clips(sentences, [voice], args.cache))[voice]
        ids = [hashlib.sha1(ogg).hexdigest()[:16] for ogg in oggs]
        for cid, ogg in zip(ids, oggs, strict=True):
            if cid not in clips:
                clips[cid] = decode_samples(ogg, rate=RATE)
        rows[(name, voice)] = (sentences, heard, ids)
    if args.latency10:
        clean = [cid for (_, voice), (_, _, ids) in rows.items() if "+snr" not in voice for cid in ids]
        long = ten_second_clips([clips[cid] for cid in dict.fromkeys(clean)], args.latency10)
        clips.update({f"{TEN}{i}": s for i, s in enumerate(long)})
    print(f"transcribing {len(clips)} clips with {args.engine_python}", file=sys.stderr, flush=True)
    moon = run_engine(args.engine_python, clips)

    results: dict[str, Any] = {"rows": {}, "groups": {}, "transcripts": []}
    for (name, voice), (sentences, heard, ids) in rows.items():
        c: Counter[str] = Counter()
        for s, t, cid in zip(sentences, heard, ids, strict=True):
            c.update(count(s, t, moon[cid]["text"]))
            # Each pair kept, so a figure can be traced to its sentences.
            results["transcripts"].append([name, voice, s.reference, t.text, moon[cid]["text"]])
        results["rows"][f"{name} {voice}"] = dict(c)
    for label, holds in GROUPS.items():
        total: Counter[str] = Counter()
        for name, voice in rows:
            if holds(voice):
                total.update(results["rows"][f"{name} {voice}"])
        if total:
            results["groups"][label] = dict(total)
    per_clip = [r["decode_s"] for cid, r in moon.items() if not cid.startswith(TEN)]
    audio = [len(clips[cid]) / RATE for cid in moon if not cid.startswith(TEN)]
    results["decode_s"] = {"clips": len(per_clip), "audio_p50": round(statistics.median(audio), 2), **_p(per_clip)}
    ten = [r["decode_s"] for cid, r in moon.items() if cid.startswith(TEN)]
    if ten:
        results["decode_10s"] = {"clips": len(ten), **_p(ten)}
    return results


def _share(a: int, n: int) -> str:
    return f"{a}/{n} ({a / n:.1%})" if n else "-"


def table(results: dict[str, Any]) -> str:
    lines = [
        "| voices | n | whisper right | Moonshine right | either right | caught (of whisper wrong) | "
        "false alarms (of whisper right) | right or flagged: today / + D / + usable d | "
        "flagged although right: today / + D / + usable d |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, c in results["groups"].items():
        n = c["n"]
        lines.append(
            f"| {label} | {n} | {_share(c['w_right'], n)} | {_share(c['m_right'], n)} | {_share(c['either'], n)} | "
            f"{_share(c['caught'], c['w_wrong'])} | {_share(c['false_alarm'], c['w_right'])} | "
            f"{' / '.join(_share(c[k], n) for k in ('rof', 'rof_d', 'rof_u'))} | "
            f"{' / '.join(_share(c[k], n) for k in ('far', 'far_d', 'far_u'))} |"
        )
    d = results["decode_s"]
    lines.append(
        f"\nMoonshine decode per clip ({d['clips']} clips, audio p50 {d['audio_p50']} s): "
        f"p50 {d['p50']} s, p90 {d['p90']} s"
    )
    if "decode_10s" in results:
        ten = results["decode_10s"]
        lines.append(f"10 s clips ({ten['clips']}): p50 {ten['p50']} s, p90 {ten['p90']} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Moonshine base-en's disagreement with tiny.en as a flag on deciding words (see the module doc)."
    )
    add_dump_arguments(parser)
    parser.add_argument(
        "--engine-python", required=True, help="python of a virtualenv with moonshine-cpp and numpy installed"
    )
    parser.add_argument(
        "--latency10", type=int, nargs="?", const=15, default=0, metavar="N", help="also time N 10 s clips (15)"
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences of each set and voice")
    parser.add_argument(
        "--json",
        type=Path,
        help="also write the figures here (per set and voice too, and each sentence's two transcripts)",
    )
    args = parser.parse_args()
    results = measure(args)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
