"""The ``tfcourse`` command: one subcommand per module, loaded on demand.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status), so ``tfcourse --help`` stays fast and a
broken optional dependency only breaks its own subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from . import language
from .language import current, say

# name -> (module, one-line help)
COMMANDS = {
    "demo": (
        "tfcourse.demo_command",
        "pre-LN vs post-LN stacks: shapes and gradient norms side by side",
    ),
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
        "tfcourse.train.train_command",
        "train a GPT from the shell (checkpoints, resume, torchrun)",
    ),
    "sample": (
        "tfcourse.train.sample_command",
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


# Who runs which command: how ``tfcourse --help`` lists them (every command in one group).
GROUPS = (
    (
        ("commands for learners", "学员的命令"),
        ("lab", "notebooks", "progress", "demo", "train", "sample", "doctor"),
    ),
    (
        ("commands for teachers (grading a class)", "教师的命令（给全班评分）"),
        ("grade", "autograder"),
    ),
    (
        (
            "commands for maintainers (changing the course in its repository)",
            "维护者的命令（在课程仓库里修改课程）",
        ),
        ("build-notebooks", "translate", "execute", "site"),
    ),
)

# A section heading as argparse writes it: the title, maybe in colour (Python 3.14), then ":".
_HEADING = r"^(\s*(?:\x1b\[[0-9;]*m)?{title}(?:\x1b\[[0-9;]*m)?):$"


class _Formatter(argparse.HelpFormatter):
    """argparse's help with its own words in the reader's language ("usage:" / "用法："),
    and its section headings ending in a full-width colon in Chinese ("选项：")."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._headings: list[str] = []

    def add_usage(self, usage, actions, groups, prefix=None):
        super().add_usage(
            usage, actions, groups, say("usage: ", "用法：") if prefix is None else prefix
        )

    def start_section(self, heading):
        if heading:
            self._headings.append(heading)
        super().start_section(heading)

    def format_help(self):
        text = super().format_help()
        if current() != "zh":
            return text
        for heading in dict.fromkeys(self._headings):
            text = re.sub(_HEADING.format(title=re.escape(heading)), r"\1：", text, flags=re.M)
        return text


class _CommandsParser(argparse.ArgumentParser):
    """The top-level parser: its help lists the commands in ``GROUPS``, the learner's first,
    instead of argparse's one list of them all."""

    def format_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for (english, chinese), names in GROUPS:
            formatter.start_section(say(english, chinese))
            formatter.add_arguments(
                [
                    argparse.Action([], dest=name, metavar=name, help=_help_text(name))
                    for name in names
                ]
            )
            formatter.end_section()
        formatter.start_section(self._optionals.title)
        formatter.add_arguments(self._optionals._group_actions)
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _help_text(name: str) -> str:
    """A command's one-line help in the reader's language."""
    return say(COMMANDS[name][1], COMMANDS_ZH[name])


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
    parser = _CommandsParser(
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
    # The commands' own parsers are plain ones (not _CommandsParser, which the group would
    # otherwise make them).
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser
    )
    for name, (module_name, _) in COMMANDS.items():
        help_text = _help_text(name)
        command_parser = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=_Formatter
        )
        _in_the_readers_language(command_parser)
        if name == only:
            importlib.import_module(module_name).add_arguments(command_parser)
    return _in_the_readers_language(parser)


# argparse's own messages (a bad flag, a missing argument), for a Chinese reader. argparse
# looks each one up through its module's gettext ``_`` when it writes it; one it does not
# list here stays as argparse wrote it.
ARGPARSE_ZH = {
    "%(prog)s: error: %(message)s\n": "%(prog)s：错误：%(message)s\n",
    "ambiguous option: %(option)s could match %(matches)s": (
        "选项 %(option)s 有歧义，可能是 %(matches)s"
    ),
    "argument %(argument_name)s: %(message)s": "参数 %(argument_name)s：%(message)s",
    "expected at least one argument": "至少需要一个值",
    "expected at most one argument": "最多只能有一个值",
    "expected one argument": "需要一个值",
    "expected %s argument": "需要 %s 个值",
    "expected %s arguments": "需要 %s 个值",
    "ignored explicit argument %r": "多余的值 %r 被忽略",
    "invalid %(type)s value: %(value)r": "无效的 %(type)s 值：%(value)r",
    "invalid choice: %(value)r (choose from %(choices)s)": (
        "无效的选择：%(value)r（可选：%(choices)s）"
    ),
    "not allowed with argument %s": "不能与参数 %s 同时使用",
    "one of the arguments %s is required": "参数 %s 中必须给出一个",
    "the following arguments are required: %s": "缺少以下参数：%s",
    "unrecognized arguments: %s": "无法识别的参数：%s",
    "usage: ": "用法：",
    "options": "选项",
    "positional arguments": "位置参数",
    "show this help message and exit": "显示本帮助信息并退出",
}


def _argparse_gettext(message: str) -> str:
    return say(message, ARGPARSE_ZH.get(message, message))


def _argparse_ngettext(singular: str, plural: str, n: int) -> str:
    return _argparse_gettext(singular if n == 1 else plural)


def main(argv: list[str] | None = None) -> int:
    argparse._ = _argparse_gettext  # type: ignore[attr-defined]
    argparse.ngettext = _argparse_ngettext  # type: ignore[attr-defined]
    argv = sys.argv[1:] if argv is None else argv
    with language.using(_language_asked(argv)):
        command = next((a for a in argv if not a.startswith("-")), None)
        if command not in COMMANDS:
            command = None
        args = build_parser(only=command).parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return 2
        with language.using(_folder_language(args, argv)):
            return importlib.import_module(COMMANDS[args.command][0]).run(args)


# The folder a command works on, by the name of its argument: a folder of the Chinese
# edition's notebooks makes the command speak Chinese, as ``grade`` does for a notebook.
FOLDER_ARGUMENTS = {"progress": "folder", "notebooks": "dir", "lab": "dir", "doctor": "root"}


def _folder_language(args: argparse.Namespace, argv: list[str]) -> str | None:
    """``"zh"`` when nothing asked for a language (no ``--language``, no ``TFCOURSE_LANG``, no
    Chinese locale) and the command's folder holds notebooks of the Chinese edition
    (``language.folder_language``); ``None``: as the command already speaks."""
    name = FOLDER_ARGUMENTS.get(args.command)
    folder = getattr(args, name, None) if name else None
    if folder is None or _language_asked(argv) is not None:
        return None
    if os.environ.get("TFCOURSE_LANG", "").strip():
        return None
    return language.folder_language(folder)


def _language_asked(argv: list[str]) -> str | None:
    """The language the command itself speaks: its ``--language`` (``lab``, ``notebooks``),
    else ``TFCOURSE_LANG``, else a Chinese locale (``language.locale_language``); ``None``:
    as the process already speaks."""
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("--language=") else None
        if arg == "--language" and i + 1 < len(argv):
            value = argv[i + 1]
        if value in language.LANGUAGES:
            return value
    if os.environ.get("TFCOURSE_LANG", "").strip():
        return None
    return language.locale_language()


if __name__ == "__main__":
    sys.exit(main())
