"""``python -m memsearch`` runs the CLI."""

from memsearch.cli import main

if __name__ == "__main__":
    main()
