"""Would a larger Whisper, asked to judge the rivals tiny.en weighed, flag the misheard deciding words it misses?

Inputs: the transcripts of ``bench.voice_wer ... --doubt --dump FILE --cache DIR`` (with their evidence, so
today's flags are weighed again exactly as ``--doubt`` does) and the same clips from ``--cache``. The judge is
any CTranslate2 Whisper (``--model``: a folder with model.bin, config.json, tokenizer.json and
vocabulary.json), run here with faster-whisper, int8, in the prompt context the bot decodes in (the owner's
words). Only the notes that today's flags leave alone and that had rivals weighed can change; for each, the
judge encodes the note once and scores the transcript and every rival's sentence (CTranslate2 ``align``, as
bot.voice.transcribe scores them). A rival's *judge gap* is its sentence's log-probability minus the
transcript's, under the judge.

The rule measured: flag a note too when some rival's judge gap is at least ``-B`` nats (B in ``--reach``).
Per voice group (piper / espeak, clean / with noise): *caught*, notes heard wrong that it flags; *needless*,
notes heard right that it flags; right or flagged and flagged although right, today and with the rule (shares of
all sentences, as ``--doubt``); and what the judge costs a note (encoding, and scoring its rivals).

``--number``: instead of the rivals, each deciding noun of the transcript in its other number ("pull
request" → "pull requests", "tests" → "test"), one sentence each: what the bot's own model makes of a plural
heard singular when ``--model`` is tiny.en itself (``--model tiny.en``: the bundled one, scored as the bot
scores its rivals).

``--twins``: instead of the rivals, each command verb of the transcript in place of its twin of the lexicon, one
sentence each: its un- or re- form ("stage" → "unstage", "run" → "rerun") or the verb without it; with
``--model tiny.en``, what the bot's own model makes of a prefix heard as nothing.

``--spare``: the other way round, on the notes today's flags do flag: a flag raised for a low probability
alone (its reasons only "p=…", perhaps "snapped from …") is spared when the judge finds each of its words at
least ``X`` likely (X in ``--sure``), and a note all of whose flags are spared runs. *spared*: notes heard right
that no longer wait (a needless tap saved); *lost*: notes heard wrong that no longer wait (a catch lost).

Run (docs/benchmarks.md, "Voice: a fourth round" and "a fifth round"):
  .venv/bin/python -m bench.voice_second_judge --dump /tmp/whisper_dump.pkl --cache /tmp/voice_clips
      --model /tmp/whisper-base-ct2 [--reach 2,3,4,5,6,8] [--json OUT]
  .venv/bin/python -m bench.voice_second_judge --dump /tmp/whisper_dump.pkl --cache /tmp/voice_clips
      --model tiny.en --number --reach 0,0.5,1,2,3
  .venv/bin/python -m bench.voice_second_judge --dump /tmp/whisper_dump.pkl --cache /tmp/voice_clips
      --model tiny.en --twins --reach 2,4,6,8
  .venv/bin/python -m bench.voice_second_judge --dump /tmp/whisper_dump.pkl --cache /tmp/voice_clips
      --model /tmp/whisper-base-ct2 --spare --sure 0.5,0.7,0.8,0.9
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.voice_second_engine import GROUPS, add_dump_arguments, columns, flagged
from bench.voice_wer import HOTWORDS, Sentence, decisive_right, make_clips
from bot.voice.audio import decode_samples
from bot.voice.doubt import Flag, Thresholds, bare, find_flags, word_probabilities
from bot.voice.snap import DEV_VERBS, verb_positions
from bot.voice.transcribe import Transcript, default_model_path, vocabulary_prompt

RATE = 16_000
_WINDOW_FRAMES = 3000  # Whisper hears 30 s at a time
_FRAMES_PER_S = 100


class Judge:
    """A CTranslate2 Whisper that scores sentences against one note's audio."""

    def __init__(self, model: Path, threads: int) -> None:
        from faster_whisper import WhisperModel  # type: ignore[import-untyped]
        from faster_whisper.tokenizer import Tokenizer  # type: ignore[import-untyped]

        self.model = WhisperModel(str(model), device="cpu", compute_type="int8", cpu_threads=threads)
        self.tokenizer = Tokenizer(
            self.model.hf_tokenizer, self.model.model.is_multilingual, task="transcribe", language="en"
        )
        prompt = vocabulary_prompt(HOTWORDS) or ""
        previous = self.tokenizer.encode(" " + prompt.strip()) if prompt else []
        self.start = self.model.get_prompt(self.tokenizer, previous, without_timestamps=True)

    def scores(self, samples: np.ndarray[Any, Any], texts: list[str]) -> tuple[list[float], float, float]:
        """Each text's log-probability given the audio; and the seconds encoding and scoring took."""
        from faster_whisper.audio import pad_or_trim  # type: ignore[import-untyped]
        from faster_whisper.transcribe import get_ctranslate2_storage  # type: ignore[import-untyped]

        t0 = time.perf_counter()
        features = pad_or_trim(self.model.feature_extractor(samples)[:, :_WINDOW_FRAMES])
        encoded = self.model.model.encode(get_ctranslate2_storage(np.expand_dims(features, 0)))
        t1 = time.perf_counter()
        frames = max(1, min(_WINDOW_FRAMES, round(len(samples) / RATE * _FRAMES_PER_S)))
        out: list[float] = []
        for text in texts:
            tokens = self.tokenizer.encode(" " + text.strip())
            probs = np.asarray(self.model.model.align(encoded, self.start, [tokens], frames)[0].text_token_probs)
            out.append(float(np.log(np.maximum(probs, 1e-12)).sum()))
        return out, t1 - t0, time.perf_counter() - t1

    def word_probabilities(self, samples: np.ndarray[Any, Any], text: str) -> tuple[tuple[str, float], ...]:
        """Each word of ``text`` with its lowest token probability given the audio (as bot.voice.evidence)."""
        from faster_whisper.audio import pad_or_trim  # type: ignore[import-untyped]
        from faster_whisper.transcribe import get_ctranslate2_storage  # type: ignore[import-untyped]

        features = pad_or_trim(self.model.feature_extractor(samples)[:, :_WINDOW_FRAMES])
        encoded = self.model.model.encode(get_ctranslate2_storage(np.expand_dims(features, 0)))
        frames = max(1, min(_WINDOW_FRAMES, round(len(samples) / RATE * _FRAMES_PER_S)))
        tokens = self.tokenizer.encode(" " + text.strip())
        probs = self.model.model.align(encoded, self.start, [tokens], frames)[0].text_token_probs
        return word_probabilities([self.tokenizer.decode([t]) for t in tokens], list(probs), text)


def low_probability_only(flag: Flag) -> bool:
    """A flag raised for its word's low probability alone: no rival, beam, sound or fallback behind it."""
    return all(part.startswith(("p=", "snapped from")) for part in flag.reason.split(", "))


def flags_of(t: Transcript) -> tuple[Flag, ...]:
    if t.evidence is None:
        return ()
    return find_flags(t.text, t.evidence, HOTWORDS, t.snapped.considered if t.snapped else (), Thresholds())


def plural(word: str) -> str:
    return word + ("es" if word.endswith(("sh", "ch", "s", "x")) else "s")


# The deciding nouns that are counted (a plural changes what runs: "merge the pull requests"): those
# bot.voice.doubt lists in both numbers, and the owner's and coding words that name one thing of many.
COUNT_NOUNS = (
    "branch", "commit", "tag", "request", "test", "conflict",
    "migration", "handoff", "webhook", "job", "image", "container", "service", "pipeline",
)  # fmt: skip
_NUMBERS = {**{w: plural(w) for w in COUNT_NOUNS}, **{plural(w): w for w in COUNT_NOUNS}}


def _with_word(words: list[str], i: int, word: str) -> str:
    """The sentence of ``words`` with ``word`` in place of the ``i``-th one, its capital and punctuation kept."""
    core = bare(words[i])
    spelled = word[:1].upper() + word[1:] if core[:1].isupper() else word
    return " ".join([*words[:i], words[i].replace(core, spelled, 1), *words[i + 1 :]])


def other_numbers(text: str) -> list[str]:
    """``text`` with one deciding noun in its other number, for each such noun (capitals and punctuation kept)."""
    words = text.split()
    out: list[str] = []
    for i, token in enumerate(words):
        core = bare(token)
        other = _NUMBERS.get(core.lower())
        if other is None:
            continue
        out.append(_with_word(words, i, other))
    return out


_VERBS = frozenset(DEV_VERBS)
# Each lexicon verb with an un- or re- form the lexicon also has, and that form: both ways ("run" ↔ "rerun").
_TWINS = {
    **{v[2:]: v for v in DEV_VERBS if v[:2] in ("un", "re") and v[2:] in _VERBS},
    **{v: v[2:] for v in DEV_VERBS if v[:2] in ("un", "re") and v[2:] in _VERBS},
}


def twins(text: str) -> list[str]:
    """``text`` with one command verb in its twin's place (``_TWINS``), for each such verb where a verb goes."""
    words = text.split()
    out: list[str] = []
    for i in verb_positions(words):
        core = bare(words[i])
        twin = _TWINS.get(core.lower())
        if twin is not None:
            out.append(_with_word(words, i, twin))
    return out


def sentences_for(t: Transcript, args: argparse.Namespace) -> list[tuple[str, str]]:
    """(word, sentence) pairs the judge weighs against the transcript."""
    if args.number or args.twins:
        made = other_numbers(t.text) if args.number else twins(t.text)
        return [(text.split()[i], text) for text in made for i in _changed(t.text, text)]
    return [(r.word, r.text) for r in t.evidence.rivals] if t.evidence is not None else []


def _changed(a: str, b: str) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(a.split(), b.split(), strict=True)) if x != y][:1]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    judge = Judge(default_model_path() if str(args.model) == "tiny.en" else args.model, args.threads)
    notes: list[dict[str, Any]] = []
    for name, voice, sentences, heard in columns(args.dump):
        todo = [i for i, (s, t) in enumerate(zip(sentences, heard, strict=True)) if to_judge(s, t, args)]
        print(f"{name} {voice}: {len(todo)} of {len(sentences)} notes to judge", file=sys.stderr, flush=True)
        # The clips the dump was made from: with the same cache they are read back, not made anew.
        oggs = asyncio.run(make_clips([sentences[i] for i in todo], [voice], args.cache))[voice] if todo else []
        judged = dict(zip(todo, oggs, strict=True))
        for i, (s, t) in enumerate(zip(sentences, heard, strict=True)):
            note: dict[str, Any] = {
                "set": name,
                "voice": voice,
                "reference": s.reference,
                "text": t.text,
                "right": decisive_right(s, t.text),
                "flagged": flagged(s, t),
                "rivals": [],
            }
            if i in judged:
                note.update(judge_note(judge, t, decode_samples(judged[i], rate=RATE), args))
            notes.append(note)
    if args.spare:
        sure = [float(x) for x in args.sure.split(",")]
        return {"sure": sure, "groups": groups(notes, sure, spared), "cost": cost(notes), "notes": notes}
    reach = [float(b) for b in args.reach.split(",")]
    return {"reach": reach, "groups": groups(notes, reach, rescored), "cost": cost(notes), "notes": notes}


def to_judge(sentence: Sentence, heard: Transcript, args: argparse.Namespace) -> bool:
    """With ``--spare``, a note some flag of which is a low probability alone; else one today's flags leave
    alone and that has sentences to weigh."""
    if args.spare:
        return any(low_probability_only(f) for f in flags_of(heard))
    return bool(sentences_for(heard, args)) and not flagged(sentence, heard)


def judge_note(judge: Judge, t: Transcript, samples: np.ndarray[Any, Any], args: argparse.Namespace) -> dict[str, Any]:
    """What the judge says of one note: its flags' words' probabilities (``--spare``), else each weighed
    sentence's gap; and what that cost."""
    if args.spare:
        start = time.perf_counter()
        probabilities = judge.word_probabilities(samples, t.text)
        flags = [
            {
                "heard": f.heard,
                "reason": f.reason,
                "judge_p": round(min(p for _, p in probabilities[f.index : f.index + f.span]), 3)
                if low_probability_only(f) and f.index < len(probabilities)
                else None,
            }
            for f in flags_of(t)
        ]
        return {"flags": flags, "encode_s": round(time.perf_counter() - start, 3), "score_s": 0.0}
    weighed = sentences_for(t, args)
    scores, encode_s, score_s = judge.scores(samples, [t.text, *(text for _, text in weighed)])
    rivals = [
        {"word": word, "text": text, "judge_gap": round(sc - scores[0], 2)}
        for (word, text), sc in zip(weighed, scores[1:], strict=True)
    ]
    return {"rivals": rivals, "encode_s": round(encode_s, 3), "score_s": round(score_s, 3)}


def spared(note: dict[str, Any], sure: float) -> str:
    """ "lost" or "spared" when every flag of ``note`` is a low probability the judge is ``sure`` of, else ""."""
    if "flags" not in note or any(f["judge_p"] is None or f["judge_p"] < sure for f in note["flags"]):
        return ""
    return "spared" if note["right"] else "lost"


def rescored(note: dict[str, Any], reach: float) -> str:
    """ "caught" or "needless" when a rival of ``note`` scores within ``reach`` nats under the judge, else ""."""
    if not any(r["judge_gap"] >= -reach for r in note["rivals"]):
        return ""
    return "needless" if note["right"] else "caught"


def groups(
    notes: list[dict[str, Any]], settings: list[float], rule: Callable[[dict[str, Any], float], str]
) -> dict[str, dict[str, Any]]:
    """Per voice group: its notes, today's right-or-flagged and flagged-although-right, and per setting how many
    notes ``rule`` moves and which way."""
    out: dict[str, dict[str, Any]] = {}
    for label, holds in GROUPS.items():
        mine = [n for n in notes if holds(n["voice"])]
        if not mine:
            continue
        c: Counter[str] = Counter(n=len(mine))
        for n in mine:
            c["rof"] += n["right"] or n["flagged"]
            c["far"] += n["right"] and n["flagged"]
            for x in settings:
                if moved := rule(n, x):
                    c[f"{moved} {x:g}"] += 1
        out[label] = dict(c)
    return out


def cost(notes: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [n for n in notes if "encode_s" in n]
    if not judged:
        return {"notes": 0}
    return {
        "notes": len(judged),
        "encode_p50_s": round(statistics.median(n["encode_s"] for n in judged), 3),
        "score_p50_s": round(statistics.median(n["score_s"] for n in judged), 3),
        "rivals_p50": statistics.median(len(n["rivals"]) or 1 for n in judged),
    }


def _share(a: int, n: int) -> str:
    return f"{a / n:.1%}" if n else "-"


def _table(results: dict[str, Any], head: str, settings: str, changes: tuple[str, str], sign: int) -> str:
    """One row per voice group and setting: the notes the rule moves into (``sign`` 1) or out of (-1) right or
    flagged (``changes[0]``) and flagged although right (``changes[1]``)."""
    lines = [
        f"| voices | n | {head} | right or flagged: today → with the rule | "
        "flagged although right: today → with the rule |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, c in results["groups"].items():
        n = c["n"]
        for x in results[settings]:
            a, b = (c.get(f"{key} {x:g}", 0) for key in changes)
            lines.append(
                f"| {label} | {n} | {x:g} | {a} | {b} | {_share(c['rof'], n)} → {_share(c['rof'] + sign * a, n)} | "
                f"{_share(c['far'], n)} → {_share(c['far'] + sign * b, n)} |"
            )
    return "\n".join(lines) + _cost_line(results)


def table(results: dict[str, Any]) -> str:
    if "sure" in results:
        head = "judge sure at | lost (wrong, no longer wait) | spared (right, no longer wait)"
        return _table(results, head, "sure", ("lost", "spared"), -1)
    return _table(results, "reach B | caught | needless", "reach", ("caught", "needless"), 1)


def _cost_line(results: dict[str, Any]) -> str:
    k = results["cost"]
    if not k["notes"]:
        return ""
    if "sure" in results:
        return f"\n\nJudged {k['notes']} notes: encoding and scoring the transcript p50 {k['encode_p50_s']} s"
    return (
        f"\n\nJudged {k['notes']} notes: encoding p50 {k['encode_p50_s']} s, scoring {k['rivals_p50']:g} "
        f"sentences p50 {k['score_p50_s']} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="A larger Whisper as a second judge of the rivals tiny.en weighed (see the module doc)."
    )
    add_dump_arguments(parser)
    parser.add_argument(
        "--model", type=Path, required=True, help="a CTranslate2 Whisper folder (the judge), or tiny.en (bundled)"
    )
    parser.add_argument("--number", action="store_true", help="weigh deciding nouns in their other number instead")
    parser.add_argument("--twins", action="store_true", help="weigh command verbs as their un-/re- twins instead")
    parser.add_argument("--spare", action="store_true", help="spare low-probability flags the judge is sure of")
    parser.add_argument("--sure", default="0.5,0.7,0.8,0.9", help="with --spare: the judge's probabilities that spare")
    parser.add_argument("--reach", default="2,3,4,5,6,8", help="judge gaps (nats below the transcript) that flag")
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 threads (2: this machine's cores)")
    parser.add_argument("--json", type=Path, help="also write the figures here, and every judged note")
    args = parser.parse_args()
    results = measure(args)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
