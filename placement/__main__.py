"""``python -m placement`` runs the command-line interface."""

from placement.cli import run

if __name__ == "__main__":
    run()
