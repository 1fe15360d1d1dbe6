"""The ``tfcourse`` command: one subcommand per module, loaded on demand.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status), so ``tfcourse --help`` stays fast and a
broken optional dependency only breaks its own subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .language import say

# name -> (module, one-line help)
COMMANDS = {
    "demo": ("tfcourse.demo", "pre-LN vs post-LN stacks: shapes and gradient norms side by side"),
    "lab": ("tfcourse.course.launch", "open the course in JupyterLab"),
    "notebooks": (
        "tfcourse.course.notebooks_command",
        "copy the learner notebooks into a folder of yours (never overwriting one)",
    ),
    "build-notebooks": (
        "tfcourse.authoring.build",
        "regenerate notebooks/ from solutions/ (--check: verify)",
    ),
    "translate": (
        "tfcourse.authoring.translation",
        "add the sections a notebook's Chinese edition lacks (--check: verify)",
    ),
    "execute": (
        "tfcourse.authoring.execute",
        "re-execute solution notebooks in place to refresh stored outputs",
    ),
    "grade": ("tfcourse.grade.command", "grade learner notebooks against the solutions"),
    "progress": (
        "tfcourse.grade.progress",
        "every exercise of the course in your folder: passed, failing, not started",
    ),
    "autograder": (
        "tfcourse.grade.autograder",
        "build a Gradescope autograder zip for one notebook",
    ),
    "train": (
        "tfcourse.train.command",
        "train a GPT from the shell (checkpoints, resume, torchrun)",
    ),
    "sample": (
        "tfcourse.train.sample",
        "write text with a model trained by `tfcourse train --dataset text`",
    ),
    "doctor": ("tfcourse.doctor", "check the installation and say how to fix what is wrong"),
    "site": (
        "tfcourse.authoring.site",
        "build the static HTML site of the course into build/site/",
    ),
}


# The same one-line help for a Chinese reader (TFCOURSE_LANG=zh).
COMMANDS_ZH = {
    "demo": "Pre-LN 与 Post-LN 的堆叠：并排比较形状和梯度范数",
    "lab": "在 JupyterLab 中打开课程",
    "notebooks": "把学员 notebook 复制到你自己的文件夹（绝不覆盖已有的文件）",
    "build-notebooks": "由 solutions/ 重新生成 notebooks/（--check：只检查）",
    "translate": "补上 notebook 中文版缺少的段落（--check：只检查）",
    "execute": "重新执行参考答案 notebook，刷新其中保存的输出",
    "grade": "对照参考答案给学员的 notebook 评分",
    "progress": "你的文件夹里课程的每一道练习：通过、未通过、尚未开始",
    "autograder": "为一个 notebook 生成 Gradescope 自动评分器的 zip 包",
    "train": "在命令行里训练 GPT（检查点、断点续训、torchrun）",
    "sample": "用 `tfcourse train --dataset text` 训练出的模型生成文本",
    "doctor": "检查安装情况，并说明如何修复出问题的地方",
    "site": "把课程的静态 HTML 网站生成到 build/site/",
}


class _Formatter(argparse.HelpFormatter):
    """argparse's help with its own words in the reader's language ("usage:" / "用法：")."""

    def add_usage(self, usage, actions, groups, prefix=None):
        super().add_usage(
            usage, actions, groups, say("usage: ", "用法：") if prefix is None else prefix
        )


def _in_the_readers_language(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The headings and the ``-h`` line argparse writes itself, in the reader's language
    (the subcommands' own help is written with ``say`` already)."""
    parser._positionals.title = say("positional arguments", "位置参数")
    parser._optionals.title = say("options", "选项")
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            action.help = say("show this help message and exit", "显示本帮助信息并退出")
    return parser


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfcourse",
        formatter_class=_Formatter,
        description=say(
            "the course's commands, one per task (tfcourse COMMAND --help)",
            "课程的命令，每项任务一个（tfcourse 命令 --help 查看用法）",
        ),
    )
    from .version import __version__

    parser.add_argument(
        "--version",
        action="version",
        version=f"tfcourse {__version__}",
        help=say("show the version and exit", "显示版本号并退出"),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        help_text = say(help_text, COMMANDS_ZH[name])
        command_parser = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=_Formatter
        )
        _in_the_readers_language(command_parser)
        if name == only:
            importlib.import_module(module_name).add_arguments(command_parser)
    return _in_the_readers_language(parser)


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
