from .tools.cli import console

console()
