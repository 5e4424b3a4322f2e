"""Voice in and out: local Whisper transcription of voice notes, the echo and the run they become, spoken answers to
waiting prompts with the deciding words snapped to what was meant, and spoken replies made by a local Piper voice.
"""
