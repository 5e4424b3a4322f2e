"""`python -m macupos`: the `macupos` command."""

from macupos.cli import main

if __name__ == "__main__":
    main()
