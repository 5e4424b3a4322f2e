"""How well the transcriber hears coding instructions: word error rate and decisive words, per setting.

The sentences are bench/data/coding_speech.txt (≥ 40 instructions: branch, rebase, push, pytest, file and
function names, project names, memory keywords). Each is spoken at run time by three voices, never stored:
the Piper ``en_US-joe-medium`` voice (bot.speech, the ``speech`` extra) and espeak-ng at 150 and 210 words
a minute; every clip is encoded like a Telegram voice note (OGG/Opus, 48 kHz mono) by bot.speech.

For each setting (model × priming × beam × temperature) and each voice it reports:
  * WER: word edits / reference words over the whole set, after a light normalisation (lower case,
    punctuation dropped, "x.py" read as "x dot py", numbers up to 99 as words);
  * decisive: the share of sentences whose decisive words (push, branch, a project name…) were all heard;
  * p50 seconds per clip (a relative figure: other work may share the machine).
Priming: "off" (no prompt), "owner" (HOTWORDS, as bot.voice_flow builds them: project names, then memory
keywords), "coding" (those and bot.voice.CODING_TERMS, the Transcriber's default glossary).

Run: .venv/bin/python -m bench.voice_wer [--models tiny.en,PATH] [--beams 1,5] [--temperatures 0,fallback]
       [--priming off,owner,coding] [--voices piper,espeak150,espeak210] [--limit N] [--cache DIR]
       [--json OUT] [--errors]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.speech import Speaker, encode_ogg_opus
from bot.voice import CODING_TERMS, Transcriber

DATA = Path(__file__).parent / "data" / "coding_speech.txt"
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
PRIMING = ("off", "owner", "coding")  # nothing; the owner's hotwords; those and bot.voice.CODING_TERMS


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
    out: list[Sentence] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
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


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


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
                wpm = VOICES[voice]
                if wpm is None:
                    clip = (await speaker.synthesize(sentence.spoken)).ogg
                else:
                    clip = _espeak(sentence.spoken, wpm, Path(tmp))
                if cached is not None:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    cached.write_bytes(clip)
                clips[voice].append(clip)
        finally:
            await speaker.aclose()
    return clips


def _model_arg(model: str) -> str | None:
    return None if model in ("", "tiny.en") else model


async def measure(
    setting: Setting, transcriber: Transcriber, sentences: list[Sentence], clips: list[bytes]
) -> dict[str, Any]:
    transcriber.beam_size = setting.beam
    transcriber.temperature = 0.0 if setting.temperature == "0" else None
    hotwords = HOTWORDS if setting.priming != "off" else []
    transcriber.glossary = CODING_TERMS if setting.priming == "coding" else ()
    edits = words = right = 0
    seconds: list[float] = []
    errors: list[dict[str, str]] = []
    for sentence, clip in zip(sentences, clips, strict=True):
        start = time.perf_counter()
        text = (await transcriber.transcribe(clip, hotwords=hotwords)).text
        seconds.append(time.perf_counter() - start)
        ref = normalize(sentence.reference)
        edits += edit_distance(ref, normalize(text))
        words += len(ref)
        ok = decisive_right(sentence, text)
        right += ok
        if edit_distance(ref, normalize(text)) or not ok:
            errors.append({"said": sentence.reference, "heard": text, "decisive": "ok" if ok else "MISSED"})
    return {
        "wer": round(edits / words, 4),
        "decisive": round(right / len(sentences), 4),
        "p50_s": round(statistics.median(seconds), 3),
        "errors": errors,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sentences = load_sentences()[: args.limit or None]
    voices = args.voices.split(",")
    clips = await make_clips(sentences, voices, args.cache)
    results: dict[str, Any] = {"sentences": len(sentences), "hotwords": HOTWORDS, "settings": []}
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
                for voice in voices:
                    row[voice] = await measure(setting, t, sentences, clips[voice])
                    if not args.errors:
                        row[voice].pop("errors")
                results["settings"].append(row)
                print(_line(row, voices), file=sys.stderr, flush=True)
                if args.errors:
                    for voice in voices:
                        for e in row[voice]["errors"]:
                            print(f"  {voice}: {e['decisive']:6} {e['said']!r} → {e['heard']!r}", file=sys.stderr)
    return results


def _line(row: dict[str, Any], voices: list[str]) -> str:
    cells = [
        f"{v}: WER {row[v]['wer']:.1%} decisive {row[v]['decisive']:.1%} p50 {row[v]['p50_s']:.2f}s" for v in voices
    ]
    return f"{row['setting']:<45} " + " | ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="tiny.en", help="comma-separated: tiny.en (bundled) or CTranslate2 paths")
    parser.add_argument("--priming", default=",".join(PRIMING), help="off, owner (hotwords), coding (and terms)")
    parser.add_argument("--beams", default="1,5")
    parser.add_argument("--temperatures", default="0,fallback", help="0: greedy/beam only; fallback: 0.0…1.0")
    parser.add_argument("--voices", default="piper,espeak150,espeak210")
    parser.add_argument("--language", default="en", help="'' lets a multilingual model detect it")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 threads (2: this machine's cores)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    parser.add_argument("--cache", type=Path, help="keep the generated clips here and reuse them (not committed)")
    parser.add_argument("--errors", action="store_true", help="keep each misheard sentence in the JSON")
    parser.add_argument("--json", type=Path, help="also write the figures here")
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
