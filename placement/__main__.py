"""``python -m placement`` runs the command-line interface."""

from placement.cli import run

run()
