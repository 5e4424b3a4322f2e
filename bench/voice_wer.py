"""How well the transcriber hears coding instructions: word error rate and decisive words, per setting.

The sentences are bench/data/coding_speech.txt (≥ 40 instructions: branch, rebase, push, pytest, file and
function names, project names, memory keywords). Each is spoken at run time by three voices, never stored:
the Piper ``en_US-joe-medium`` voice (bot.voice.speak, the ``speech`` extra) and espeak-ng at 150 and 210 words
a minute; every clip is encoded like a Telegram voice note (OGG/Opus, 48 kHz mono) by bot.voice.speak.

For each setting (model × priming × beam × temperature) and each voice it reports:
  * WER: word edits / reference words over the whole set, after a light normalisation (lower case,
    punctuation dropped, "x.py" read as "x dot py", numbers up to 99 as words);
  * decisive: the share of sentences whose decisive words (push, branch, a project name…) were all heard;
  * p50 seconds per clip (a relative figure: other work may share the machine).
Priming: "off" (no prompt), "owner" (HOTWORDS, as bot.voice.flow builds them: project names, then memory
keywords), "coding" (those and bot.voice.transcribe.CODING_TERMS, the Transcriber's default glossary).

Snapping (bot.voice.snap): with priming, each transcript is also snapped to the command verbs and the
owner's names (HOTWORDS), as the bot does. One transcription gives every candidate's score, so each margin of
``--snap`` is evaluated on the same transcripts: "snap" rows give WER, decisive, how many sentences snapping
changed, and ``over``: replacements by a word the reference does not have (over-corrections). The near
misses (bench/data/coding_speech_near_misses.txt: "run" beside "rerun", "stage" beside "stash", "Ava"
beside "Eywa") are scored the same way with ``--near-misses``; there every change is an over-correction.

Flags (bot.voice.doubt), with ``--doubt``: per set and voice, the sentences whose deciding words are right,
right or flagged (the note waits for the owner), and flagged although right, at the bot's default thresholds;
``doubt_grid`` in the JSON sweeps the thresholds on the same transcripts. Sentence files are arguments
(default bench/data/coding_speech.txt; the format is in ``--help``); bench/data/coding_speech_heldout*.txt are
held-out sets (each file's header says what it was used for), and bench/data/coding_speech_remarks.txt holds
notes that are no commands (questions, remarks: every flag there on a note heard right is a needless tap).
``--noise 10`` adds every voice again with seeded white noise at 10 dB SNR.

Run: .venv/bin/python -m bench.voice_wer [SENTENCES ...] [--doubt] [--noise DB] [--dump PKL]
       [--models tiny.en,PATH] [--beams 1,5] [--temperatures 0,fallback]
       [--priming off,owner,coding] [--voices piper,espeak150,espeak210] [--snap 2,4,6,8] [--near-misses]
       [--limit N] [--cache DIR] [--json OUT] [--errors]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.voice.audio import decode_samples
from bot.voice.doubt import Thresholds, find_flags
from bot.voice.snap import choose, edit_distance
from bot.voice.speak import Speaker, encode_ogg_opus
from bot.voice.transcribe import CODING_TERMS, Transcriber, Transcript

DATA = Path(__file__).parent / "data" / "coding_speech.txt"
NEAR_MISSES = Path(__file__).parent / "data" / "coding_speech_near_misses.txt"
# What VoiceFlow.hotwords would give for an owner with these projects and recent handoffs: project names
# first, then up to four keywords of each recent handoff (some are not in any sentence, as in real use).
PROJECTS = ["Macupos", "Eywa", "Tarsier", "Kestrel"]
KEYWORDS = [
    "backoff", "handoff", "webhook", "allowlist",
    "rollout", "redaction", "migration", "transcriber",
    "pytest", "mypy", "Codex", "relay",
    "sqlite", "telegram", "docker", "staging",
]  # fmt: skip
HOTWORDS = PROJECTS + KEYWORDS
VOICES: dict[str, int | None] = {"piper": None, "espeak150": 150, "espeak210": 210}
_MARKED = re.compile(r"\[([^\]]+)\]")
NOISE_SEED = 34  # the noise mixed into "+snrN" voices is the same on every run: seeded by this and the clip
_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
# Spelling variants that are the same words to a reader, joined on both sides before comparing.
_COMPOUNDS = {
    "time out": "timeout",
    "roll back": "rollback",
    "check out": "checkout",
    "log in": "login",
    "set up": "setup",
    "back off": "backoff",
    "hand off": "handoff",
    "hand offs": "handoffs",
    "read me": "readme",
    "doc string": "docstring",
    "re run": "rerun",
    "py test": "pytest",
}


@dataclass(frozen=True, slots=True)
class Sentence:
    reference: str
    decisive: tuple[str, ...]
    spoken: str


_CLIP_VERSION = 2  # bump when the voices or their encoding change: cached clips are then made anew
PRIMING = ("off", "owner", "coding")  # nothing; the owner's hotwords; those and bot.voice.transcribe.CODING_TERMS


@dataclass(frozen=True, slots=True)
class Setting:
    model: str
    priming: str  # one of PRIMING
    beam: int
    temperature: str  # "0" or "fallback"

    @property
    def name(self) -> str:
        return f"{self.model} priming={self.priming} beam={self.beam} T={self.temperature}"


def load_sentences(path: Path = DATA) -> list[Sentence]:
    """Either format (see ``--help``): "reference | decisive, words | spoken form", or the deciding words in
    [brackets] in the sentence, then optionally " | spoken form"."""
    out: list[Sentence] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if "[" in line.split("|", 1)[0]:
            said, _, spoken = (p.strip() for p in line.partition("|"))
            reference = " ".join(said.replace("[", "").replace("]", "").split())
            out.append(Sentence(reference, tuple(_MARKED.findall(said)), spoken or reference))
            continue
        parts = [p.strip() for p in line.split("|")]
        reference = parts[0]
        decisive = tuple(w.strip() for w in parts[1].split(",") if w.strip()) if len(parts) > 1 else ()
        spoken = parts[2] if len(parts) > 2 and parts[2] else reference
        out.append(Sentence(reference, decisive, spoken))
    return out


def _number_words(n: int) -> str:
    if n < 20:
        return _NUMBERS[n]
    tens, unit = divmod(n, 10)
    return _TENS[tens - 2] + ("" if unit == 0 else " " + _NUMBERS[unit])


def normalize(text: str) -> list[str]:
    """Lower case, "x.py" → "x dot py", hyphens as spaces, other punctuation dropped, 0–99 as words,
    the spelling variants in _COMPOUNDS joined ("time out" → "timeout")."""
    text = text.lower().replace("’", "'")
    text = re.sub(r"(?<=[a-z0-9])\.(?=[a-z0-9])", " dot ", text)
    text = re.sub(r"[-_/]", " ", text)
    text = re.sub(r"[^a-z0-9' ]", " ", text).replace("'", "")
    words: list[str] = []
    for w in text.split():
        words += _number_words(int(w)).split() if w.isdigit() and int(w) < 100 else [w]
    joined = " " + " ".join(words) + " "
    for split, whole in _COMPOUNDS.items():
        joined = joined.replace(f" {split} ", f" {whole} ")
    return joined.split()


def decisive_right(sentence: Sentence, hypothesis: str) -> bool:
    heard = " " + " ".join(normalize(hypothesis)) + " "
    return all(" " + " ".join(normalize(w)) + " " in heard for w in sentence.decisive)


def _espeak(text: str, wpm: int, folder: Path) -> bytes:
    wav = folder / "clip.wav"
    subprocess.run(["espeak-ng", "-s", str(wpm), "-w", str(wav), text], check=True, capture_output=True)
    with wave.open(str(wav)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return encode_ogg_opus(pcm, rate)


async def make_clips(sentences: list[Sentence], voices: list[str], cache: Path | None) -> dict[str, list[bytes]]:
    """Each sentence spoken by each voice; with ``cache``, clips made by an earlier run are reused from there."""
    clips: dict[str, list[bytes]] = {v: [] for v in voices}
    with tempfile.TemporaryDirectory() as tmp:
        speaker = Speaker()
        try:
            for voice, sentence in itertools.product(voices, sentences):
                key = hashlib.sha1(f"{_CLIP_VERSION}|{voice}|{sentence.spoken}".encode()).hexdigest()[:16]
                cached = cache / f"{key}.ogg" if cache else None
                if cached is not None and cached.exists():
                    clips[voice].append(cached.read_bytes())
                    continue
                base, _, snr = voice.partition("+snr")
                wpm = VOICES[base]
                if wpm is None:
                    clip = (await speaker.synthesize(sentence.spoken)).ogg
                else:
                    clip = _espeak(sentence.spoken, wpm, Path(tmp))
                if snr:
                    clip = with_noise(clip, float(snr), f"{NOISE_SEED}|{base}|{sentence.spoken}")
                if cached is not None:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    cached.write_bytes(clip)
                clips[voice].append(clip)
        finally:
            await speaker.aclose()
    return clips


def with_noise(clip: bytes, snr_db: float, seed: str) -> bytes:
    """The clip with white noise mixed in at ``snr_db`` (speech power over the loud half of the samples, so
    the edge silence does not lower the bar), re-encoded like a voice note. Deterministic: seeded by ``seed``."""
    rate = 48_000
    samples = decode_samples(clip, rate=rate).astype(np.float64)
    loud = np.sort(samples**2)[len(samples) // 2 :]
    power = float(loud.mean()) if len(loud) else 0.0
    rng = np.random.default_rng(int(hashlib.sha1(seed.encode()).hexdigest()[:12], 16))
    noisy = samples + rng.normal(0.0, np.sqrt(power / 10 ** (snr_db / 10)), len(samples))
    pcm = np.clip(noisy * 32767, -32768, 32767).astype(np.int16)
    return encode_ogg_opus(pcm, rate)


def _model_arg(model: str) -> str | None:
    return None if model in ("", "tiny.en") else model


def _score(sentences: list[Sentence], texts: list[str]) -> dict[str, Any]:
    edits = words = right = 0
    for sentence, text in zip(sentences, texts, strict=True):
        ref = normalize(sentence.reference)
        edits += edit_distance(ref, normalize(text))
        words += len(ref)
        right += decisive_right(sentence, text)
    return {"wer": round(edits / words, 4), "decisive": round(right / len(sentences), 4)}


def _over(sentence: Sentence, changes: tuple[tuple[str, str], ...]) -> int:
    """Replacements by a word the reference does not have."""
    said = set(normalize(sentence.reference))
    return sum(1 for _, word in changes if not set(normalize(word)) <= said)


def doubt_grid() -> list[Thresholds]:
    """The thresholds ``--doubt`` sweeps (the first is the bot's default): word probability, beam gap (-1: the
    beams are not asked), snapping gap, and whether the word after a command verb counts as deciding."""
    grid = [Thresholds()]
    for p, beam, snap_gap, objects in itertools.product(
        (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), (-1.0, 0.05, 0.1, 0.2, 0.3), (0.0, 2.0, 4.0, 6.0), (True, False)
    ):
        grid.append(Thresholds(p, beam, snap_gap, objects))
    return grid


def doubt_figures(sentences: list[Sentence], heard: list[Transcript], thresholds: Thresholds) -> dict[str, Any]:
    """Sentences whose deciding words are right, right or flagged (the note waits for the owner), and
    flagged although right (a tap the owner did not need), as shares of all sentences."""
    n = len(sentences)
    right = caught = needless = 0
    for s, t in zip(sentences, heard, strict=True):
        flags = (
            find_flags(t.text, t.evidence, HOTWORDS, t.snapped.considered if t.snapped else (), thresholds)
            if t.evidence
            else ()
        )
        ok = decisive_right(s, t.text)
        right += ok
        caught += ok or bool(flags)
        needless += ok and bool(flags)
    return {
        "right": round(right / n, 4),
        "right_or_flagged": round(caught / n, 4),
        "flagged_right": round(needless / n, 4),
    }


async def measure(
    setting: Setting,
    transcriber: Transcriber,
    sentences: list[Sentence],
    clips: list[bytes],
    margins: list[float],
    doubt: bool = False,
) -> dict[str, Any]:
    transcriber.beam_size = setting.beam
    transcriber.temperature = 0.0 if setting.temperature == "0" else None
    hotwords = HOTWORDS if setting.priming != "off" else []
    transcriber.glossary = CODING_TERMS if setting.priming == "coding" else ()
    seconds: list[float] = []
    heard: list[Transcript] = []
    for clip in clips:
        start = time.perf_counter()
        # Snapping's candidates are scored during the call; the margin is applied below (choose).
        # The rivals are weighed as the bot weighs them, after the echo (Transcriber.weigh).
        note = await transcriber.transcribe(clip, hotwords=hotwords, names=HOTWORDS if hotwords else None)
        heard.append(await transcriber.weigh(note))
        seconds.append(time.perf_counter() - start)
    raw = [t.heard for t in heard]
    result: dict[str, Any] = {**_score(sentences, raw), "p50_s": round(statistics.median(seconds), 3)}
    result["p90_s"] = round(sorted(seconds)[int(0.9 * (len(seconds) - 1))], 3)
    result["_heard"] = heard  # for --dump: flags can be weighed again without transcribing again
    if doubt:
        grid = doubt_grid()
        result["doubt"] = doubt_figures(sentences, heard, grid[0])
        result["doubt_grid"] = [
            [th.probability, th.beam_gap, th.snap_gap, th.objects, *doubt_figures(sentences, heard, th).values()]
            for th in grid[1:]
        ]
        result["flags"] = [
            {
                "said": s.reference,
                "text": t.text,
                "right": decisive_right(s, t.text),
                "flags": [f"{f.heard} → {'/'.join(f.alternatives)} ({f.reason})" for f in t.flags],
                "words": [f"{w}:{p:.2f}" for w, p in t.evidence.words] if t.evidence else [],
                "beams": [f"{h} ({g:.2f})" for h, g in t.evidence.hypotheses] if t.evidence else [],
            }
            for s, t in zip(sentences, heard, strict=True)
        ]
    result["errors"] = [
        {"said": s.reference, "heard": text, "decisive": "ok" if decisive_right(s, text) else "MISSED"}
        for s, text in zip(sentences, raw, strict=True)
        if edit_distance(normalize(s.reference), normalize(text)) or not decisive_right(s, text)
    ]
    if hotwords and margins:
        result["snap"] = {}
        for margin in margins:
            snapped = [choose(t.heard, t.snapped.considered, margin) if t.snapped else None for t in heard]
            texts = [sn.text if sn else t.heard for sn, t in zip(snapped, heard, strict=True)]
            changed = [(s, sn) for s, sn in zip(sentences, snapped, strict=True) if sn is not None and sn.changes]
            result["snap"][str(margin)] = {
                **_score(sentences, texts),
                "changed": len(changed),
                "over": sum(_over(s, sn.changes) for s, sn in changed),
                "changes": [f"{s.reference!r}: " + ", ".join(f"{a}→{b}" for a, b in sn.changes) for s, sn in changed],
            }
        result["gaps"] = [
            {
                "said": s.reference,
                "heard": t.heard,
                "candidates": [(c.candidate.word, round(c.gap, 2)) for c in t.snapped.considered],
            }
            for s, t in zip(sentences, heard, strict=True)
            if t.snapped is not None and t.snapped.considered
        ]
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    files = args.sentences or [DATA]
    sets = {(f.stem.removeprefix("coding_speech_") or "coding"): load_sentences(f)[: args.limit or None] for f in files}
    sets = {("coding" if k == "coding_speech" else k): v for k, v in sets.items()}
    if args.near_misses:
        sets["near_misses"] = load_sentences(NEAR_MISSES)[: args.limit or None]
    voices = args.voices.split(",")
    if args.noise:
        voices += [f"{v}+snr{args.noise:g}" for v in voices]
    clips = {name: await make_clips(sentences, voices, args.cache) for name, sentences in sets.items()}
    margins = [float(m) for m in args.snap.split(",") if m.strip()]
    results: dict[str, Any] = {"sentences": {k: len(v) for k, v in sets.items()}, "hotwords": HOTWORDS}
    results["settings"] = []
    transcripts: dict[tuple[str, str, str], Any] = {}
    for model in args.models.split(","):
        language = args.language or None
        async with Transcriber(
            _model_arg(model), cpu_threads=args.threads, without_timestamps=True, language=language
        ) as t:
            await t.load()
            grid = itertools.product(
                args.priming.split(","),
                [int(b) for b in args.beams.split(",")],
                args.temperatures.split(","),
            )
            for priming, beam, temperature in grid:
                setting = Setting(model, priming, beam, temperature)
                row: dict[str, Any] = {"setting": setting.name}
                for name, sentences in sets.items():
                    row[name] = {}
                    for voice in voices:
                        row[name][voice] = m = await measure(
                            setting, t, sentences, clips[name][voice], margins, args.doubt
                        )
                        if args.dump:
                            transcripts[(setting.name, name, voice)] = (sentences, m.pop("_heard"))
                        m.pop("_heard", None)
                        if not args.errors:
                            m.pop("errors")
                            m.pop("flags", None)
                            m.pop("gaps", None)
                            for snapped in m.get("snap", {}).values():
                                snapped.pop("changes")
                results["settings"].append(row)
                if args.dump:
                    args.dump.write_bytes(pickle.dumps(transcripts))
                print(_line(row, voices), file=sys.stderr, flush=True)
                if args.errors:
                    for name in sets:
                        for voice in voices:
                            for e in row[name][voice]["errors"]:
                                print(
                                    f"  {name} {voice}: {e['decisive']:6} {e['said']!r} → {e['heard']!r}",
                                    file=sys.stderr,
                                )
    return results


def _line(row: dict[str, Any], voices: list[str]) -> str:
    lines = [row["setting"]]
    for name in [k for k in row if k != "setting"]:
        for v in voices:
            m = row[name][v]
            cells = [f"{name} {v}: WER {m['wer']:.1%} decisive {m['decisive']:.1%} p50 {m['p50_s']:.2f}s"]
            if "doubt" in m:
                d = m["doubt"]
                cells.append(
                    f"right {d['right']:.1%} right-or-flagged {d['right_or_flagged']:.1%} "
                    f"flagged-although-right {d['flagged_right']:.1%}"
                )
            for margin, sn in m.get("snap", {}).items():
                cells.append(
                    f"snap {margin}: WER {sn['wer']:.1%} decisive {sn['decisive']:.1%} "
                    f"changed {sn['changed']} over {sn['over']}"
                )
            lines.append("  " + " | ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Word error rate, deciding words and flags of spoken coding instructions (see the module doc).",
        epilog="SENTENCES files: one instruction a line, '#' starts a comment. Either the deciding words in "
        "square brackets within the sentence ('[stash] my changes and [push] the [branch]'), or the columns "
        "'reference | decisive words, comma-separated | spoken form'; in both an optional last '| spoken form' "
        "is what the voices read instead (a file name as said: 'config dot pie'). A sentence counts as right "
        "when every deciding word is in the transcript (after normalisation).",
    )
    parser.add_argument(
        "sentences", nargs="*", type=Path, help=f"sentence files (default: {DATA.relative_to(DATA.parents[2])})"
    )
    parser.add_argument("--models", default="tiny.en", help="comma-separated: tiny.en (bundled) or CTranslate2 paths")
    parser.add_argument("--priming", default=",".join(PRIMING), help="off, owner (hotwords), coding (and terms)")
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--temperatures", default="0,fallback", help="0: greedy/beam only; fallback: 0.0…1.0")
    parser.add_argument("--voices", default="piper,espeak150,espeak210")
    parser.add_argument("--language", default="en", help="'' lets a multilingual model detect it")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 threads (2: this machine's cores)")
    parser.add_argument("--snap", default="2,4,6,8", help="snapping margins (nats) to evaluate; '' for none")
    parser.add_argument("--near-misses", action="store_true", help="also score the near-miss sentences")
    parser.add_argument(
        "--noise", type=float, default=0, help="also each voice with seeded white noise at this SNR (dB)"
    )
    parser.add_argument(
        "--doubt",
        action="store_true",
        help="report flags (bot.voice.doubt): right, right or flagged, flagged although right",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    parser.add_argument("--cache", type=Path, help="keep the generated clips here and reuse them (not committed)")
    parser.add_argument("--errors", action="store_true", help="keep each misheard sentence in the JSON")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dump", type=Path, help="pickle the transcripts (with their evidence) here")
    args = parser.parse_args()
    if not shutil.which("espeak-ng") and any(v.startswith("espeak") for v in args.voices.split(",")):
        sys.exit("espeak-ng is needed for the espeak voices")
    results = asyncio.run(run(args))
    out = json.dumps(results, indent=2, ensure_ascii=False)
    print(out)
    if args.json:
        args.json.write_text(out + "\n")


if __name__ == "__main__":
    main()
