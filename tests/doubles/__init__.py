"""Doubles of the outside services Macupos talks to: real servers on 127.0.0.1 speaking the real wire protocols."""
