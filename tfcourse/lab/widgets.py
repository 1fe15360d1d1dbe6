"""Interactive explorers for the notebooks (ipywidgets 8, JupyterLab 4).

Two explorers, both built on ``Explorer`` (controls + one picture redrawn in place):

- ``attention_explorer()``: attention weights of a tiny character-level GPT as a
  heatmap; choose the text, the layer and the head (notebook 02).
- ``gradient_flow_explorer()``: gradient norm per block of a pre-LN and a post-LN
  GPT with identical weights; choose depth, which model, loss and init scale
  (notebook 06).

How they behave:

- **In place.** The picture lives in one ``ipywidgets.Output`` whose ``outputs``
  are *replaced* on every change (never appended), so a slider move never stacks
  a new figure under the old one. Figures are standalone ``matplotlib`` figures,
  never registered with pyplot, so the inline backend cannot show a stray copy.
- **Debounced and cached.** Sliders and the text box fire only on release /
  Enter (``continuous_update=False``); every picture is computed by a function
  cached with ``functools.lru_cache`` keyed on the control values, so going back
  to a setting is instant.
- **Static fallback.** Displaying an explorer sends one bundle with the widget
  view *and* a PNG of the current picture *and* plain text. JupyterLab with the
  widget manager shows the live widget; nbval runs, exported HTML (nbconvert
  drops a widget view whose state was not saved) and other viewers show the PNG.
- **Side-effect free.** The models are tiny and run on the CPU; the global
  random state is saved and restored around them, so building an explorer does
  not change the random numbers of the cells that follow it.

Use as the last expression of a cell (``tc.widgets.attention_explorer()``) or
``display(explorer)``.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Mapping

import ipywidgets as W
import torch

from ..language import say
from ..nn.config import GPTConfig
from ..nn.model import GPT
from . import plots
from .probes import LOSSES, gradient_probe, roundoff_level, twin_models

PNG_DPI = 80


# --------------------------------------------------------------------------- machinery


def png_output(png: bytes, text: str = "<figure>") -> dict:
    """An nbformat ``display_data`` output holding a PNG (what ``Output.outputs`` stores)."""
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": text},
    }


def text_output(text: str) -> dict:
    """An nbformat ``stream`` output (used to show a message instead of a figure)."""
    return {
        "output_type": "stream",
        "name": "stdout",
        "text": text if text.endswith("\n") else text + "\n",
    }


class Explorer:
    """Controls plus one picture that is redrawn in place whenever a control changes.

    Args:
        render: ``render(**values) -> bytes`` returns the PNG for the controls'
            current values (keyword = control name). Make it cached: it is
            called on every change. A ``ValueError`` it raises is shown as a
            message in place of the picture (a callback's exception would
            otherwise vanish into the browser console).
        controls: name -> ipywidgets control with a ``value``.
        title: one line shown above the controls, and the bundle's ``text/plain``.

    Attributes:
        controls, output (the ``ipywidgets.Output`` holding the picture),
        widget (the ``VBox`` shown in JupyterLab), png (bytes of the current picture,
        or None while a message is shown), renders (how many times a picture was
        put into ``output``).
    """

    def __init__(
        self,
        render: Callable[..., bytes],
        controls: Mapping[str, W.ValueWidget],
        *,
        title: str = "",
    ):
        if not callable(render):
            got = type(render).__name__
            raise TypeError(
                say(f"render must be callable, got {got}", f"render 必须可调用，实际是 {got}")
            )
        if not controls:
            raise ValueError(
                say("an Explorer needs at least one control", "Explorer 至少需要一个控件")
            )
        self.render = render
        self.controls = dict(controls)
        self.title = title
        self.output = W.Output(layout=W.Layout(min_height="120px"))
        header = [W.HTML(f"<b>{title}</b>")] if title else []
        self.widget = W.VBox(
            header
            + [
                W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")),
                self.output,
            ]
        )
        self.png: bytes | None = None
        self.renders = 0
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.refresh()

    @property
    def values(self) -> dict:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change):
        self.refresh()

    def refresh(self):
        """Render the current values and replace the output's content with the picture."""
        try:
            png = self.render(**self.values)
        except ValueError as error:
            self.png = None
            self.output.outputs = (text_output(f"Cannot draw this: {error}"),)
            return
        self.png = png
        self.renders += 1
        # Assigning the trait replaces the whole content: the frontend clears and
        # redraws in one step, and nothing leaks into the cell when no frontend
        # is listening (unlike printing inside ``with output:``).
        self.output.outputs = (png_output(png, f"<{self.title or 'figure'}>"),)

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        if self.png is not None:
            bundle["image/png"] = base64.b64encode(self.png).decode("ascii")
        values = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        bundle["text/plain"] = f"{self.title or 'Explorer'} ({values})"
        return bundle

    def __repr__(self):
        return f"Explorer({self.title!r}, {self.values})"


def _cpu_and_private_rng():
    """Run a computation without touching the global (CPU) random state."""
    return torch.random.fork_rng(devices=[])


# --------------------------------------------------------------------------- attention

# A short text with many repeats, so a few dozen training steps are enough for
# heads to pick up structure (attend to the previous character, to the start of
# a word, ...). Written for this course.
CORPUS = (
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog, "
    "and the dog saw the cat. a cat and a dog sat on a mat and a log. "
    "the bird sat on the cat, the cat sat on the dog, the dog sat on the log. "
    "then the cat ran, the dog ran, and the bird flew to the top of the tree.\n"
)
UNKNOWN = "?"
VOCAB = "".join(sorted(set(CORPUS))) + UNKNOWN
DEFAULT_TEXT = "the cat sat on the mat."
MAX_TEXT = 48
TRAIN_STEPS = (
    40  # AdamW steps of the explorer's model: enough for sharp heads (tested), cheap on a CPU
)
ATTENTION_CONFIG = GPTConfig(
    vocab_size=len(VOCAB), max_seq_len=64, n_layers=2, n_heads=4, d_model=64, dropout=0.0
)


def encode(text: str, vocab: str = VOCAB) -> list[int]:
    """Character ids in ``vocab``; lower-cased, unknown characters become ``UNKNOWN``."""
    index = {ch: i for i, ch in enumerate(vocab)}
    unknown = index.get(UNKNOWN, 0)
    return [index.get(ch, unknown) for ch in text.lower()]


@functools.lru_cache(maxsize=4)
def char_model(train_steps: int = TRAIN_STEPS, seed: int = 0) -> GPT:
    """The explorer's tiny GPT (2 layers, 4 heads, width 64), trained on ``CORPUS``.

    Deterministic for a given ``(train_steps, seed)`` and cached, so only the
    first explorer of a kernel pays for training. The cached model is shared with
    the explorers: read it, do not train or modify it (copy it first).
    ``train_steps=0`` gives the untrained model, whose attention is nearly
    uniform over the allowed keys.
    """
    if isinstance(train_steps, bool) or not isinstance(train_steps, int) or train_steps < 0:
        raise ValueError(
            say(
                f"train_steps must be an int >= 0, got {train_steps!r}",
                f"train_steps 必须是 >= 0 的 int，实际是 {train_steps!r}",
            )
        )
    with _cpu_and_private_rng():
        torch.manual_seed(seed)
        model = GPT(ATTENTION_CONFIG)
        data = torch.tensor(encode(CORPUS), dtype=torch.long)
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        block, batch = 32, 8
        model.train()
        for _ in range(train_steps):
            starts = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
            idx = torch.stack([data[s : s + block] for s in starts])  # (batch, block)
            targets = torch.stack([data[s + 1 : s + block + 1] for s in starts])
            loss = model.loss(idx, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return model.eval()


@torch.no_grad()
def attention_weights(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """Every layer's attention weights for token ids ``idx (T,)``: ``(n_layers, H, T, T)``, CPU."""
    if not isinstance(idx, torch.Tensor) or idx.dim() != 1:
        got = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise ValueError(
            say(
                f"idx must be a 1-D tensor of token ids (T,), got {got}",
                f"idx 必须是存放词元 id 的一维张量 (T,)，实际是 {got}",
            )
        )
    idx = idx.to(next(model.parameters()).device)
    captured = []
    # Re-run each layer's attention on its own input to get the weights
    # (``forward`` directly, so the hook does not fire again); the model's own
    # forward pass stays untouched.
    hooks = [
        block.attn.register_forward_pre_hook(
            lambda module, args: captured.append(module.forward(args[0], return_weights=True)[1][0])
        )
        for block in model.blocks
    ]
    try:
        model(idx[None])
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(captured).float().cpu()


@functools.lru_cache(maxsize=32)
def _attention_for_text(text: str, train_steps: int, seed: int) -> torch.Tensor:
    return attention_weights(char_model(train_steps, seed), torch.tensor(encode(text)))


def _check_text(text) -> str:
    if not isinstance(text, str):
        got = type(text).__name__
        raise TypeError(say(f"text must be a str, got {got}", f"text 必须是 str，实际是 {got}"))
    if not text:
        raise ValueError(
            say("text is empty: type at least one character", "text 是空的：请至少输入一个字符")
        )
    if len(text) > MAX_TEXT:
        raise ValueError(
            say(
                f"text has {len(text)} characters; at most {MAX_TEXT} fit in the heatmap",
                f"text 有 {len(text)} 个字符；热力图最多只能容纳 {MAX_TEXT} 个",
            )
        )
    return text


@functools.lru_cache(maxsize=128)
def attention_png(
    text: str = DEFAULT_TEXT,
    layer: int = 0,
    head: int | str = 0,
    train_steps: int = TRAIN_STEPS,
    seed: int = 0,
) -> bytes:
    """PNG of the attention heatmap for one (text, layer, head); ``head="all"`` draws every head."""
    _check_text(text)
    weights = _attention_for_text(text, train_steps, seed)  # (L, H, T, T)
    n_layers, n_heads = weights.shape[:2]
    if layer not in range(n_layers):
        raise ValueError(
            say(
                f"layer must be in 0..{n_layers - 1}, got {layer!r}",
                f"layer 必须在 0..{n_layers - 1} 中，实际是 {layer!r}",
            )
        )
    tokens = [ch if ch in VOCAB else UNKNOWN for ch in text.lower()]
    note = (
        say(f" ('{UNKNOWN}' = not in the vocabulary)", f"（'{UNKNOWN}' = 不在词表中）")
        if UNKNOWN in tokens
        else ""
    )
    if head == "all":
        fig = plots.attention_heads_grid(
            weights[layer],
            tokens,
            title=say(f"layer {layer}, all heads{note}", f"第 {layer} 层，全部的头{note}"),
        )
    elif head in range(n_heads):
        fig = plots.attention_heatmap(
            weights[layer, head],
            tokens,
            title=say(f"layer {layer}, head {head}{note}", f"第 {layer} 层，头 {head}{note}"),
        )
    else:
        raise ValueError(
            say(
                f"head must be in 0..{n_heads - 1} or 'all', got {head!r}",
                f"head 必须在 0..{n_heads - 1} 中或为 'all'，实际是 {head!r}",
            )
        )
    return plots.figure_to_png(fig, dpi=PNG_DPI)


def attention_explorer(
    text: str = DEFAULT_TEXT,
    *,
    layer: int = 0,
    head: int | str = 0,
    train_steps: int = TRAIN_STEPS,
    seed: int = 0,
) -> Explorer:
    """Heatmap of a tiny character-level GPT's attention weights, with controls.

    The model (``char_model``: 2 layers, 4 heads, width 64, causal) is trained
    for ``train_steps`` AdamW steps on the short built-in ``CORPUS`` so that its
    heads show structure; it is seeded, cached, and runs on the CPU.

    Args:
        text: the input; one token per character, lower-cased, at most
            ``MAX_TEXT`` characters; characters outside the corpus show as ``?``.
        layer: initial layer (0 or 1).
        head: initial head (0..3), or ``"all"`` for every head of the layer.
        train_steps: training steps of the model (0 = untrained, near-uniform attention).
        seed: seed of the model's initialization and training batches.

    Returns:
        An ``Explorer``: controls ``text`` (press Enter to apply), ``layer``,
        ``head``. Rows of the heatmap are queries, columns keys; the upper
        triangle is 0 because of the causal mask.
    """
    _check_text(text)
    n_layers, n_heads = ATTENTION_CONFIG.n_layers, ATTENTION_CONFIG.n_heads
    if layer not in range(n_layers):
        raise ValueError(
            say(
                f"layer must be in 0..{n_layers - 1}, got {layer!r}",
                f"layer 必须在 0..{n_layers - 1} 中，实际是 {layer!r}",
            )
        )
    if head != "all" and head not in range(n_heads):
        raise ValueError(
            say(
                f"head must be in 0..{n_heads - 1} or 'all', got {head!r}",
                f"head 必须在 0..{n_heads - 1} 中或为 'all'，实际是 {head!r}",
            )
        )
    char_model(train_steps, seed)  # validate and train once, before any control exists
    controls = {
        "text": W.Text(
            value=text,
            description=say("text", "文本"),
            continuous_update=False,
            layout=W.Layout(width="22em"),
        ),
        "layer": W.Dropdown(
            options=list(range(n_layers)),
            value=layer,
            description=say("layer", "层"),
            layout=W.Layout(width="12em"),
        ),
        "head": W.Dropdown(
            options=[*range(n_heads), "all"],
            value=head,
            description=say("head", "头"),
            layout=W.Layout(width="12em"),
        ),
    }
    return Explorer(
        functools.partial(_attention_render, train_steps=train_steps, seed=seed),
        controls,
        title=say(
            "Attention weights of a tiny character-level GPT", "一个字符级小 GPT 的注意力权重"
        ),
    )


def _attention_render(*, text, layer, head, train_steps, seed):
    # The text box passes anything the learner types; turn its problems into messages.
    return attention_png(text, layer, head, train_steps, seed)


# --------------------------------------------------------------------------- gradient flow

GRADIENT_CONFIG = GPTConfig(
    vocab_size=64, max_seq_len=32, n_layers=12, n_heads=4, d_model=64, dropout=0.0
)
MODELS = ("both", "pre-LN", "post-LN")


@functools.lru_cache(maxsize=64)
def gradient_flow(
    depth: int = 12, loss: str = "lm", init_scale: float = 1.0, seed: int = 0
) -> dict:
    """Gradient norms of a pre-LN and a post-LN GPT with identical weights.

    The models are ``GRADIENT_CONFIG`` with ``n_layers=depth``, every weight
    matrix (embeddings and linear layers) multiplied by ``init_scale``; one
    batch ``(4, 32)`` of random tokens with random targets. Cached.

    Returns:
        ``{"pre-LN": probe, "post-LN": probe}`` where ``probe`` is
        ``tfcourse.lab.probes.gradient_probe``'s result (keys ``loss``,
        ``embedding``, ``blocks``, ``output_shape``), plus ``round_off``
        (``probes.roundoff_level``) for ``loss="sum"``.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 48:
        raise ValueError(
            say(
                f"depth must be an int in 1..48, got {depth!r}",
                f"depth 必须是 1..48 中的 int，实际是 {depth!r}",
            )
        )
    if loss not in LOSSES:
        raise ValueError(
            say(
                f"loss must be one of {LOSSES}, got {loss!r}",
                f"loss 必须是 {LOSSES} 之一，实际是 {loss!r}",
            )
        )
    if not isinstance(init_scale, (int, float)) or not init_scale > 0:
        raise ValueError(
            say(
                f"init_scale must be a number > 0, got {init_scale!r}",
                f"init_scale 必须是 > 0 的数，实际是 {init_scale!r}",
            )
        )
    config = GRADIENT_CONFIG.replace(n_layers=depth)
    with _cpu_and_private_rng():
        pre, post = twin_models(config, seed)
        generator = torch.Generator().manual_seed(seed)
        idx = torch.randint(0, config.vocab_size, (4, config.max_seq_len), generator=generator)
        targets = torch.randint(0, config.vocab_size, (4, config.max_seq_len), generator=generator)
        result = {}
        for name, model in (("pre-LN", pre), ("post-LN", post)):
            with torch.no_grad():
                for param in model.parameters():
                    if param.dim() >= 2:  # weight matrices, not norms or biases
                        param.mul_(init_scale)
            result[name] = gradient_probe(model, idx, targets, loss)
            if loss == "sum":  # the true gradient is 0: measure what float32 makes of it
                result[name]["round_off"] = roundoff_level(model, idx, targets, loss)
    return result


@functools.lru_cache(maxsize=128)
def gradient_flow_png(
    depth: int = 12, model: str = "both", loss: str = "lm", init_scale: float = 1.0, seed: int = 0
) -> bytes:
    """PNG of the gradient norm per block for the given controls."""
    if model not in MODELS:
        raise ValueError(
            say(
                f"model must be one of {MODELS}, got {model!r}",
                f"model 必须是 {MODELS} 之一，实际是 {model!r}",
            )
        )
    probes = gradient_flow(depth, loss, init_scale, seed)
    names = ["pre-LN", "post-LN"] if model == "both" else [model]
    round_off = max(probes[n]["round_off"] for n in names) if loss == "sum" else None
    fig = plots.gradient_norms(
        {n: probes[n]["blocks"] for n in names},
        embedding={n: probes[n]["embedding"] for n in names},
        title=say(
            f"{depth} blocks, loss={loss}, init scale {init_scale:g}",
            f"{depth} 个块，loss={loss}，初始化缩放 {init_scale:g}",
        ),
        round_off=round_off,
    )
    return plots.figure_to_png(fig, dpi=PNG_DPI)


def gradient_flow_explorer(
    depth: int = 12,
    *,
    model: str = "both",
    loss: str = "lm",
    init_scale: float = 1.0,
    seed: int = 0,
) -> Explorer:
    """Gradient norm per block, pre-LN vs post-LN, with controls.

    Both models start from identical weights (``tfcourse.lab.probes.twin_models``);
    each point on a line is ``gradient_probe``'s norm of one block's parameter
    gradients; the open marker at position 0 is the gradient with respect to the
    embedding output (an activation, not a parameter). With ``loss="sum"`` a dashed
    line marks the float32 round-off level measured against a float64 copy.
    Computed on the CPU, seeded and cached.

    Args:
        depth: number of blocks (1..48; the slider goes to 24).
        model: ``"both"``, ``"pre-LN"`` or ``"post-LN"``.
        loss: ``"lm"`` (next-token cross-entropy) or ``"sum"`` (sum of the final
            norm's output: a constant for both variants, since that output is
            normalized, so every gradient is round-off).
        init_scale: factor applied to every initial weight matrix (log slider, 0.1..10).
        seed: seed of the weights and the batch.

    Returns:
        An ``Explorer`` with controls ``depth``, ``model``, ``loss``, ``init_scale``.
    """
    gradient_flow_png(
        depth, model, loss, float(init_scale), seed
    )  # validate before building controls
    controls = {
        "depth": W.IntSlider(
            value=depth,
            min=1,
            max=max(24, depth),
            description=say("depth", "深度"),
            continuous_update=False,
        ),
        "model": W.Dropdown(
            options=list(MODELS),
            value=model,
            description=say("model", "模型"),
            layout=W.Layout(width="14em"),
        ),
        "loss": W.Dropdown(
            options=list(LOSSES),
            value=loss,
            description=say("loss", "损失"),
            layout=W.Layout(width="12em"),
        ),
        "init_scale": W.FloatLogSlider(
            value=init_scale,
            base=10,
            min=-1,
            max=1,
            step=0.1,
            description=say("init scale", "初始化缩放"),
            continuous_update=False,
            readout_format=".2g",
        ),
    }

    def render(*, depth, model, loss, init_scale):
        # Round the log slider's float so that equal-looking settings share a cache entry.
        return gradient_flow_png(depth, model, loss, round(float(init_scale), 6), seed)

    return Explorer(
        render,
        controls,
        title=say(
            "Gradient norm per block: pre-LN vs post-LN", "各块的梯度范数：Pre-LN 与 Post-LN"
        ),
    )
