"""The ``tfcourse`` command: one subcommand per module, loaded on demand.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status), so ``tfcourse --help`` stays fast and a
broken optional dependency only breaks its own subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
COMMANDS = {
    "demo": ("tfcourse.demo", "pre-LN vs post-LN stacks: shapes and gradient norms side by side"),
    "lab": ("tfcourse.course.launch", "open the course in JupyterLab"),
    "build-notebooks": ("tfcourse.course.build", "regenerate notebooks/ from solutions/ (--check: verify)"),
    "translate": ("tfcourse.course.translation", "add the sections a notebook's Chinese edition lacks (--check: verify)"),
    "execute": ("tfcourse.course.execute", "re-execute solution notebooks in place to refresh stored outputs"),
    "grade": ("tfcourse.course.grade_command", "grade learner notebooks against the solutions"),
    "autograder": ("tfcourse.course.autograder", "build a Gradescope autograder zip for one notebook"),
    "train": ("tfcourse.train.command", "train a GPT from the shell (checkpoints, resume, torchrun)"),
    "sample": ("tfcourse.train.sample", "write text with a model trained by `tfcourse train --dataset text`"),
    "doctor": ("tfcourse.doctor", "check the installation and say how to fix what is wrong"),
    "site": ("tfcourse.course.site", "build the static HTML site of the course into build/site/"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfcourse", description=__doc__.splitlines()[0])
    from . import __version__

    parser.add_argument("--version", action="version", version=f"tfcourse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == only:
            importlib.import_module(module_name).add_arguments(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS:
        command = None
    args = build_parser(only=command).parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    return importlib.import_module(COMMANDS[args.command][0]).run(args)


if __name__ == "__main__":
    sys.exit(main())
