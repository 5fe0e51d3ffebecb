"""``python -m deepseek_eyes`` runs the command line."""

from deepseek_eyes.cli import main

main()
