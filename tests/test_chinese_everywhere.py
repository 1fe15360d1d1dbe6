"""A reader of the Chinese edition meets no English sentence of ours: not in the notebooks'
printed outputs, not in their figures, not in the commands' help and output.

"Ours" leaves out code, names, numbers and units, the terms Chinese keeps in English
(``helpers.KEPT_IN_ENGLISH``), the model's own English samples, and messages that PyTorch
writes itself. The maintainers' commands (``build-notebooks``, ``translate``, ``execute``,
``site``) speak English: CONTRIBUTING.md, their only documentation, is English.
"""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
import textwrap

import pytest

from tfcourse.lab.figure_text import TEXTS_KEY

from helpers import ROOT, english_sentences

CHINESE_SOLUTIONS = sorted((ROOT / "solutions" / "zh").glob("*.ipynb"))
# What PyTorch says itself, quoted in an output after our own words: left out.
THEIRS = ("Invalid backend", "Unsupported Tensor.item()", "Invalid device string")


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("saved runs/x/checkpoint.pt at step 20", True),
        ("tfcourse train: copy data (vocab 33, loss floor 0.0000 nats)", True),
        ("    tfcourse train --dataset markov --steps 300 --out runs/markov", False),
        ("copy task, greedy decoding: 4.0% of 1984 symbols copied right", True),
        ("  --seed SEED           (default: 0)", True),
        ("real words             GPT 98%", True),
        ("训练 20 步，用时 0.0 分钟", False),
        ("Pre-LN 与 Post-LN 的堆叠：并排比较形状和梯度范数", False),
        ("用法：tfcourse train [-h] [--dataset {markov,copy,text}]", False),
        ("RMSNorm：6/6 项检查通过", False),
        ("运行 `make lab` 打开课程", False),
        ("max |cos 误差|，位置   只舍入 θ_i", False),
        ("--- 温度 0.5，top_k 10：\nReturn the value of the key", False),
        ("scores = q @ k^T / sqrt(d_k): (2, 5, 5) (B, T_q, T_k)", False),
        ("config.vocab_size = 64", False),
        ("tc.KVCache (torch.cat)", False),
        ("PreallocatedKVCache", False),
        ("idx (2, 10) -> logits (2, 10, 64)", False),
        ("weights @ v           (2, 4, 5, 4)     (B, H, T, head_dim)", False),
    ],
)
def test_english_prose_is_found_and_code_names_and_samples_are_not(text, english):
    assert bool(english_sentences(text)) is english


def _ours(text: str) -> str:
    for fragment in THEIRS:
        text = "\n".join(line.split(fragment)[0] for line in text.split("\n"))
    return text


def _texts_in_png(encoded) -> list[str] | None:
    """The texts a picture the package drew keeps in its PNG (``figure_text.png_metadata``)."""
    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode("".join(encoded))))
    return json.loads(image.text[TEXTS_KEY]) if TEXTS_KEY in image.text else None


def _read(notebook) -> tuple[list[tuple[str, str]], list[str]]:
    """(where, text) for every text a reader sees in the stored outputs, figures included;
    and the cells whose pictures carry no recorded texts."""
    texts, unrecorded = [], []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            where = cell.get("id", "?")
            data = output.get("data", {})
            if output.get("output_type") == "stream":
                texts.append((where, "".join(output.get("text", ""))))
            elif output.get("output_type") == "error":
                texts.append((where, f"{output.get('ename')}: {output.get('evalue')}"))
            elif "text/plain" in data and "image/png" not in data:
                texts.append((where, "".join(data["text/plain"])))
            if "image/png" in data:
                recorded = output.get("metadata", {}).get("image/png", {}).get(TEXTS_KEY)
                if recorded is None:
                    recorded = _texts_in_png(data["image/png"])
                if recorded is None:
                    unrecorded.append(where)
                texts += [(f"{where} (figure)", text) for text in recorded or []]
    return texts, unrecorded


@pytest.mark.parametrize("notebook", CHINESE_SOLUTIONS, ids=lambda path: path.stem)
def test_a_chinese_notebook_prints_and_draws_no_english_of_ours(notebook):
    texts, unrecorded = _read(notebook)
    assert not unrecorded, (
        f"figures stored without their texts in cells {unrecorded}: run "
        f"`tfcourse execute solutions/zh/{notebook.name}`"
    )
    english = [
        f"{where}: {line}" for where, text in texts for line in english_sentences(_ours(text))
    ]
    assert not english, "English in the Chinese edition:\n" + "\n".join(english)


def test_the_scan_sees_an_english_label_in_a_figure(tmp_path):
    """A figure's texts are stored beside its picture in a Jupyter kernel, and an English
    label among them is found: the test above can fail."""
    script = textwrap.dedent(
        """
        import json, matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.core.pylabtools import select_figure_formats
        from tfcourse.lab.figure_text import record_figure_texts
        shell = InteractiveShell.instance()
        select_figure_formats(shell, {"png"})  # what the inline backend does in a kernel
        assert record_figure_texts(shell)
        fig, ax = plt.subplots()
        ax.plot([0, 1], label="validation loss")
        ax.set_title("训练损失"); ax.legend()
        data, metadata = shell.display_formatter.format(fig)
        print(json.dumps({"data": {"image/png": data["image/png"]}, "metadata": metadata}))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    output = {"output_type": "display_data", **json.loads(run.stdout.splitlines()[-1])}
    notebook = tmp_path / "figure.ipynb"
    notebook.write_text(json.dumps({"cells": [{"id": "plot", "outputs": [output]}]}))
    texts, unrecorded = _read(notebook)
    assert unrecorded == [] and ("plot (figure)", "训练损失") in texts
    assert [line for _, text in texts for line in english_sentences(text)] == ["validation loss"]


def test_a_picture_the_package_draws_keeps_its_texts(tmp_path):
    """A widget's figure is a PNG the package drew (``plots.figure_to_png``): its texts travel
    inside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tfcourse.lab import fonts, plots

    with matplotlib.rc_context():
        fonts.use_chinese_fonts()
        fig, ax = plt.subplots()
        ax.set_title("第 0 层，头 1")
        png = base64.b64encode(plots.figure_to_png(fig)).decode("ascii")
        plt.close(fig)
    output = {"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}
    notebook = tmp_path / "widget.ipynb"
    notebook.write_text(json.dumps({"cells": [{"id": "widget", "outputs": [output]}]}))
    assert _read(notebook) == ([("widget (figure)", "第 0 层，头 1")], [])


CJK_PADDED_LITERAL = re.compile(r"\{(['\"])[^'\"{}]*[\u4e00-\u9fff][^'\"{}]*\1:[<>^]?\d+s?\}")


def test_a_chinese_table_pads_its_text_by_display_width():
    """``f"{'均值':>12}"`` counts a Chinese character as one column and the table drifts:
    the Chinese edition pads with ``tc.pad(text, width, align)``."""
    found = [
        f"{path.name}: {line.strip()}"
        for path in sorted((ROOT / "solutions").glob("*.zh.md"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if CJK_PADDED_LITERAL.search(line)
    ]
    assert not found, "\n".join(found)
    assert CJK_PADDED_LITERAL.search("""print(f"{'均值范围':>22}")""")


def test_quotation_marks_are_the_mainland_ones():
    texts = [
        *(ROOT / "solutions").glob("*.zh.md"),
        ROOT / "README.zh.md",
        ROOT / "docs" / "glossary.md",
    ]
    found = [path.name for path in texts if re.search("[「」]", path.read_text(encoding="utf-8"))]
    assert not found, f"「」 in {found}: the course quotes with “”"


PYTHON_WORD_IN_VERDICT = re.compile(r"^\s*->.*(?<![A-Za-z_`])(True|False|None)(?![A-Za-z_`])")


def test_a_chinese_verdict_answers_in_chinese():
    """A verdict line (``  -> 不成立：……``) answers 是/否 (``tc.yes_no``), not Python's
    ``True``/``False``."""
    found = [
        f"{notebook.stem} {where}: {line.strip()}"
        for notebook in CHINESE_SOLUTIONS
        for where, text in _read(notebook)[0]
        for line in text.split("\n")
        if PYTHON_WORD_IN_VERDICT.search(line)
    ]
    assert not found, "\n".join(found)
    assert PYTHON_WORD_IN_VERDICT.search("  -> 不成立：它改变了梯度：True；……")
