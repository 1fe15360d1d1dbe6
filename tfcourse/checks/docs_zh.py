"""The check functions' docstrings for a Chinese reader: what ``help(check_xxx)`` shows in the
Chinese edition (``tfcourse.checks.localized_docs``). Code, formulas, shapes and names are the
English docstrings' own; only the prose is Chinese."""

DOCS_ZH = {
    "check_attention": """检查缩放点积注意力的实现，参考实现是
    ``tfcourse.scaled_dot_product_attention``。

    接口：``fn(q, k, v, mask=None) -> (output, weights)``，其中 q 为 ``(..., T_q, d_k)``，
    k 为 ``(..., T_k, d_k)``，v 为 ``(..., T_k, d_v)``；``mask`` 是一个布尔张量，可广播到
    ``(..., T_q, T_k)``，True 表示可以关注（这里不会出现整行都被遮住的情况）::

        weights = softmax(q @ k^T / sqrt(d_k), masked to -inf where mask is False)   # over keys
        output = weights @ v                     # (..., T_q, d_v); weights (..., T_q, T_k)

    子检查（共 7 项）：输入没有被原地修改；不带掩码的 (2, 5, 8)；带因果掩码；4 维输入
    (2, 3, 6, 4)（批次维和头维）配一个 (6, 6) 的掩码；批大小 1、T=1；T_q != T_k 且 d_v != d_k；
    一个随机的 (2, 5, 5) 掩码。比较的是输出、注意力权重，以及 q、k、v 的梯度。
    """,
    "check_bias_savings": """检查一个函数：统计 ``bias=False`` 能省掉多少个参数。

    接口：``fn(module) -> int``：``module`` 中每个带偏置的 ``nn.Linear`` 的偏置元素个数之和
    （在 ``bias=False`` 下，各个 LayerNorm 仍保留自己的偏置）。检查会在几个建在 meta 设备上的
    GPT 上调用它：GPT-2 small、``bias=False`` 的 GPT-2 small（应为 0：已经没有可去掉的了），
    以及一个不做权重绑定、MLP 宽度也不同的小 GPT。期望值就是 ``bias=False`` 省下的参数量：
    模型的参数量，减去同一个模型在 ``bias=False`` 下的参数量。

    子检查（共 4 项）：对 GPT-2 small 返回 int；它的数值；bias=False 时为 0；那个小 GPT。
    """,
    "check_causal_mask": """检查一个生成因果掩码的函数，参考实现是 ``tfcourse.causal_mask``。

    接口：``fn(T) -> torch.Tensor``，dtype 为 ``torch.bool``，形状为 ``(T, T)``；查询 ``i``
    可以关注键 ``j`` 的位置为 True，即 ``j <= i``（下三角，*包括*对角线）。设备不限。

    子检查（共 4 项）：T = 5, 1, 2, 16（评分时，5 和 16 会换成为该学员随机抽取的两个尺寸，
    都不超过 200：``cases.case_int``）。
    """,
    "check_configure_optimizer": """检查构建优化器的函数
    ``fn(model, *, lr, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8) -> AdamW``。

    参考实现是 ``tfcourse.train.optim.configure_optimizer``：在 ``model`` 的可训练参数
    （``requires_grad`` 为真；绑定的权重只算一次，和 ``model.parameters()`` 列出的一样）上建一个
    ``torch.optim.AdamW``，分成两个参数组：``p.dim() >= 2`` 的参数（矩阵和嵌入）用
    ``weight_decay``，``p.dim() < 2`` 的参数（偏置、归一化的增益）用 ``weight_decay=0``；每个
    参数组都用 ``lr``、``betas`` 和 ``eps``。只要每个参数拿到的权重衰减都对，怎样分组都能通过
    （三个参数组、别的顺序）。

    子检查（共 4 项）：课程的 GPT（有偏置、LayerNorm、语言模型头做了权重绑定），用不同于默认值的
    设置；LLaMA 式的 GPT（RMSNorm、没有偏置、旋转位置编码、独立的语言模型头）；冻结了部分参数、
    只传 ``lr`` 的课程 GPT（由此检查默认值）；错误的输入（``model`` 是一个张量列表、``lr=0``、
    ``weight_decay=-0.1``）要抛出 ``TypeError`` 或 ``ValueError``。参数按对象本身（identity）
    比较：每个可训练参数恰好出现一次，冻结的参数不放进去。如果是已知的常见错误，会直接点明
    （``MISTAKES``：用了 Adam 而不是 AdamW、全部衰减或全不衰减、偏置或归一化的增益做了衰减、
    词嵌入没有衰减、同一个参数出现两次、放进了冻结的参数或漏掉了参数、放进的是副本而不是参数本身、
    某个设置没有传下去、错误的输入没有被拒绝）。
    """,
    "check_estimate_loss": """检查评估损失的函数 ``fn(model, batches) -> float``。

    ``batches (n, B, T + 1)`` 存放的是词元 id。函数对每个批次计算
    ``model(batch[:, :-1]) (B, T, V)`` 相对 ``batch[:, 1:]`` 的平均交叉熵，再对这 ``n``
    个批次取平均，以一个数返回（float 或 0 维张量）。模型要在 eval 模式下、在
    ``torch.no_grad()`` 中运行，用完后恢复成传进来时的模式。

    子检查（共 3 项）：3 个批次，模型传进来时处于训练模式；1 个批次，模型传进来时处于 eval 模式；
    每个模型都回到原来的模式，且批次没有被改动。如果是已知的常见错误，会直接点明
    （``MISTAKES``，以及探针模型当场拒绝的操作）。
    """,
    "check_feedforward": """检查一个逐位置前馈网络（MLP）类，参考实现是
    ``tfcourse.FeedForward``（精确 GELU）。

    接口：``cls(d_model, d_hidden=None, *, dropout=0.0, bias=True)``，一个 ``nn.Module``，含
    ``fc_in = Linear(d_model, d_hidden)`` 和 ``fc_out = Linear(d_hidden, d_model)``
    （``d_hidden`` 默认为 ``4 * d_model``；``bias=False`` 时不带偏置）::

        y = dropout(fc_out(gelu(fc_in(x))))      # exact (erf) GELU; (B, T, D) -> (B, T, D)

    dropout 只作用在输出上，而且只在训练模式下生效。

    子检查（共 8 项）：默认宽度下的参数布局；输入没有被原地修改；(2, 5, 16) 的输出与梯度；
    批大小 1、T=1；d_hidden=24；bias=False；eval 模式下 dropout=0.5（应当不起作用）；
    训练模式下 dropout=0.5（作用在输出上）。
    """,
    "check_first_head_weights": """检查一个函数：取出第 0 个头的注意力权重。

    接口：``fn(mha, x) -> weights (B, T, T)``，其中 ``mha`` 是一个带因果掩码的
    ``tfcourse.MultiHeadAttention``，``x`` 的形状为 ``(B, T, D)``。要返回第 0 个头的 softmax
    权重，并用 ``mha`` 自己的参数算出来（在 ``mha.qkv_proj`` 中，第 ``[0, head_dim)`` 行给出
    第 0 个头的查询，第 ``[D, D + head_dim)`` 行给出它的键；缩放因子为 ``1/sqrt(head_dim)``；
    使用因果掩码）。结果必须等于 ``mha(x, return_weights=True)[1][:, 0]``。

    子检查（共 5 项）：(2, 5, 24)，4 个头；批大小 1、T=1；(3, 6, 12)，3 个头且不带偏置；
    mha 的参数保持不变；x 没有被原地修改。
    """,
    "check_fuse_qkv": """检查融合 QKV 投影的函数 ``fn(q_proj, k_proj, v_proj) -> fused``。

    接口：三个参数都是形状相同的 ``nn.Linear(D_in, D_out)``（要么都带偏置，要么都不带）。
    ``fn`` 返回一个 ``nn.Linear(D_in,
    3 * D_out)``（或任何带 ``weight``/``bias``、前向计算与之相同的模块），使得
    ``fused(x) == cat([q_proj(x), k_proj(x), v_proj(x)], dim=-1)``：权重的行依次为
    ``[q; k; v]``，也就是 ``MultiHeadAttention.qkv_proj`` 的布局。不带偏置时，融合层的
    ``bias`` 为 None（或全零）。

    子检查（共 4 项）：带偏置的方阵投影；不带偏置的；非方阵投影（``D_in != D_out``）；
    三个输入保持不变。
    """,
    "check_generate": """检查自回归生成函数
    ``fn(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None,
    generator=None)``。

    ``idx (B, T)`` 存放词元 id；函数在它后面接上 ``max_new_tokens`` 个词元，返回
    ``(B, T + max_new_tokens)``（``idx`` 本身保持不变）。每个新词元这样得到：把上下文截成最后
    ``model.config.max_seq_len`` 个词元，取最后一个位置的 logits，除以 ``temperature``；
    给了 ``top_k`` 时，把比第 k 大的 logit 小的值都设为 ``-inf``；给了 ``top_p`` 时，把概率
    ``softmax(logits)`` 从大到小排序，凡是比它更可能的词元的概率之和已经达到 ``top_p`` 的词元，
    都设为 ``-inf``（越过 ``top_p`` 的那个词元保留，所以至少留下一个）；然后调用
    ``torch.multinomial(softmax, 1, generator=generator)``。模型要在 eval 模式下、在
    ``torch.no_grad()`` 中运行，用完后恢复成传进来时的模式。只有用到 ``top_p`` 的那个用例才会传入
    ``top_p``。

    子检查（共 5 项）：2 个词元的提示词，在温度 1 下一直生成到超过 ``max_seq_len``；温度 0.4；
    温度 2 下的 top-k 3，模型传进来时处于 eval 模式；温度 1.5 下先做 top-k 8、再做 top-p 0.7；
    提示词保持不变，且每个模型都回到原来的模式。如果是已知的常见错误，会直接点明
    （``MISTAKES``；探针模型当场拒绝的操作：``REFUSALS``；``torch.multinomial`` 因为拿到的是
    logits 而不是概率而拒绝采样，以及因为 top-p 把某一行的词元全部丢掉而拒绝采样）。
    """,
    "check_get_batch": """检查取批次的函数
    ``fn(data, batch_size, seq_len, *, generator=None) -> (x, y)``。

    ``data (N,)`` 存放词元 id。每次调用先用
    ``torch.randint(0, N - seq_len, (batch_size,), generator=generator, device=data.device)``
    抽出 ``batch_size`` 个窗口起点，再返回 ``x (B, T)``，即各个窗口 ``data[s : s + T]``，
    以及 ``y (B, T)``，即同样的窗口向后错开一位 ``data[s + 1 : s + T + 1]``：``y[:, t]``
    是 ``x[:, t]`` 之后的那个词元。两者都在 ``data`` 所在的设备上；``data`` 保持不变。

    子检查（共 3 项）：几百个词元长的序列；恰好 ``seq_len + 1`` 个词元的序列（只有一个窗口，
    起点为 0）；``data`` 保持不变。如果是已知的常见错误，会直接点明（``MISTAKES``）。
    """,
    "check_gpt": """检查一个 GPT 类，参考实现是 ``tfcourse.GPT``。

    接口：``cls(config)``，参数是一个 ``tfcourse.GPTConfig``；得到的 ``nn.Module`` 使用
    ``tfcourse.GPT`` 的参数名：``tok_emb``（``Embedding(V, D)``）、``pos_emb``（可学习的
    位置表，参数为 ``weight (max_seq_len, D)``）、``blocks``（由若干块组成的 ``ModuleList``，
    块采用 ``tfcourse.TransformerBlock`` 的布局，用 ``config.block_kwargs()`` 构建）、
    ``final_norm``，以及 ``lm_head``（``Linear(D, V,
    bias=False)``），它的权重*就是* ``tok_emb.weight``（权重绑定）::

        logits = lm_head(final_norm(blocks(tok_emb(idx) + pos_emb.weight[:T])))   # (B, T, V)

    ``forward(idx (B, T) long) -> logits (B, T, V)``。当 ``config.positional == "rope"``
    时没有位置表：``pos_emb`` 为 None，也不加任何东西（旋转位置编码在注意力内部）。用到的
    配置是 ``GPT_CONFIGS``（GPT-2 风格：可学习的位置编码、tanh 近似的 GELU、与嵌入绑定的
    语言模型头；dropout 为 0；最后一个配置改用旋转位置编码）。

    ``config.dropout`` 作用在嵌入上（``drop``，一个 ``nn.Dropout``），位于第一个块之前，
    而且只在训练模式下生效。

    子检查（共 9 项）：参数布局；lm_head 与 tok_emb 绑定；idx (2, 8) 没有被原地修改；
    批大小 1、T=1 时的 logits 与参数梯度，然后是 (2, 16) 即占满整个上下文时的；第二个配置
    （1 层，d_model 24，bias=False）在 (3, 8) 上；第三个配置（旋转位置编码）在 (2, 8) 上；
    第一个配置在训练模式下用 dropout=0.5，并把各块的输出投影置零（这时各块原样传递 x，
    能改变 logits 的只剩嵌入上的 dropout：它必须改变 logits）；一个新建的模型，用它自己的
    ``__init__`` 给出的权重，在随机词元上的损失与 ln V 相差不超过 ``INITIAL_LOSS_MARGIN``
    （GPT-2 的初始化；PyTorch 的默认初始化起步时要高出几十 nats），而且它的权重符合 GPT-2
    的统计特征：每个 Linear 和 Embedding 的权重以及位置表的标准差为 0.02，写入残差流的投影
    （``out_proj``、``fc_out``）为 0.02 / sqrt(2 * n_layers)，Linear 的偏置为零
    （``INIT_STD_TOLERANCE``）。
    """,
    "check_gpt2_small_params": """检查一个函数：把 ``tfcourse.GPT`` 的参数量写成其配置的函数。

    接口：``fn(config: GPTConfig) -> int``：``tfcourse.GPT(config)`` 的参数量（绑定在一起的
    矩阵只算一次），即 ``GPT(config).num_params()``，适用于 GPT-2 系列（可学习的位置编码、
    LayerNorm、GELU MLP）。检查会在 GPT-2 small（``GPTConfig.preset("gpt2-small")``）上调用它，
    也会在它的几个变体上调用：不做权重绑定、不带偏置、``d_hidden=2048``；还有一个不做权重
    绑定的小 GPT。每个期望值都来自建在 meta 设备上的参考实现。

    子检查（共 6 项）：对 GPT-2 small 返回 int；然后每个配置各一项。
    """,
    "check_grad_norm_probe": """检查一个梯度探针，参考实现是
    ``tfcourse.lab.probes.gradient_probe(..., loss="lm")``。

    接口：``fn(model, idx, targets) -> (embedding_grad_norm, block_grad_norms)``，其中
    ``model`` 是一个 ``tfcourse.GPT``，词元 id 为 ``idx (B, T)``，目标为
    ``targets (B, T)``：先清掉模型原有的梯度，再对 ``model(idx)`` 的平均下一个词元交叉熵
    做一次前向传播和反向传播。返回

    - ``embedding_grad_norm``（float）：d loss / d（嵌入层的输出，即第一个块的输入，
      形状为 (B, T, D)）的 L2 范数，
    - ``block_grad_norms``（float 列表，从第一个块开始）：每个块一个值，即该块全部参数的
      梯度合在一起的 L2 范数。

    传进来的模型在 ``.grad`` 里带着过时的梯度。不要留下任何钩子（hook）。

    子检查（共 4 项）：一个前置层归一化（Pre-LN）模型，(2, 12) 个词元；与它对应的后置层
    归一化（Post-LN）模型；批大小 1、T=1；模型上没有残留钩子，且 idx/targets 没有被修改。
    """,
    "check_kv_cache_attention": """检查带 KV 缓存的注意力函数
    ``fn(q, k_new, v_new, past_k=None, past_v=None) -> (out, k, v)``。

    接口：``q``、``k_new``、``v_new`` 的形状为 ``(B, H, T_new, head_dim)``，对应最新的
    ``T_new`` 个词元；``past_k``/``past_v`` 的形状为 ``(B, H, T_past, head_dim)``（或为
    None：还没有缓存）。``k``/``v`` 是留给下一次调用的缓存，形状为 ``(B, H, T_past + T_new,
    head_dim)``（沿时间轴 ``dim=-2`` 先放旧的，再接新的）；
    ``out (B, H, T_new, head_dim)`` 是新查询对全部键做的因果注意力：新查询 ``i`` 位于位置
    ``T_past + i``，能看到键 ``0..T_past + i``。参考实现是
    ``tfcourse.production.attend_with_cache``。

    子检查（共 5 项）：没有缓存（应等于因果注意力）；逐个词元解码，每一步都与在整个序列上
    做的完整注意力对比；先有 4 个词元的缓存，再来一块 3 个新词元（掩码必须按缓存长度平移）；
    批大小 1 且 T=1；输入没有被原地修改。
    """,
    "check_layernorm": """检查一个 LayerNorm 类，参考实现是 ``tfcourse.LayerNorm``。

    接口：``cls(d_model, eps=1e-5)`` 是一个 ``nn.Module``，参数为 ``weight (D,)`` 和
    ``bias (D,)``（沿用 ``nn.LayerNorm`` 的参数名）；``forward(x)`` 的映射是
    ``(..., D) -> (..., D)``，对每个词元在最后一维上做归一化::

        y = (x - mean) / sqrt(var + eps) * weight + bias      # var: biased (divide by D)

    子检查（共 6 项）：参数布局；输入没有被原地修改；x (2, 5, 16) 的输出与梯度；
    eps=0.1（eps 放错位置就会暴露出来）；批大小 1、T=1；较小的输入（0.03 * randn），
    这时默认的 eps 会产生影响。
    权重和偏置都是随机的，不是 1 和 0。
    """,
    "check_layernorm_backward": """检查亲手写出的层归一化反向传播
    ``fn(x, weight, grad_out, eps=1e-5) -> (grad_x, grad_weight, grad_bias)``，
    与经过 ``tfcourse.LayerNorm`` 的自动求导对照。

    接口：``x`` 和 ``grad_out``（从上面传下来的梯度 ``dL/dy``）的形状是 ``(..., D)``，
    ``weight`` 的形状是 ``(D,)``；对每个词元，记 ``sigma = sqrt(var + eps)``（``var`` 是有偏
    方差）、``g = grad_out * weight``::

        grad_x = (g - mean(g) - x_hat * mean(g * x_hat)) / sigma   # means over the last axis
        grad_weight = sum(grad_out * x_hat), grad_bias = sum(grad_out)   # over every token

    检查在 ``torch.no_grad()`` 下调用你的函数，传入的张量也不需要梯度：函数要自己算，
    不能调用自动求导。函数不得修改它的输入。

    子检查（共 5 项）：x (2, 5, 16)；x (8, 16)，词元沿 dim 0 排列；eps=0.1；批大小 1、T=1；
    尺度为 0.03 的较小输入，这时 eps 会起作用。weight 和 bias 都是随机的。能指出的错误：
    两个均值项都漏掉、漏掉其中一项、轴取错、把均值写成求和、漏掉 weight、用了无偏方差、
    eps 加在平方根外面、weight 和 bias 的梯度没有在词元上求和或取了平均、用 x 代替 x_hat，
    以及用了自动求导。
    """,
    "check_llama_block": """检查一个 ``LlamaBlock`` 类（LLaMA 的块），参考实现是配上
    均方根归一化（RMSNorm）、SwiGLU、旋转位置编码、分组键/值头且不带偏置的
    ``tfcourse.TransformerBlock``。

    接口：``cls(d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0,
    dropout=0.0)``，一个 ``nn.Module``，含四个子模块：``norm1`` 和 ``norm2``（两个 RMSNorm，
    只有 ``weight``）、``attn``（``RotaryAttention``：``qkv_proj``、``out_proj``）以及
    ``mlp``（``SwiGLU``：``gate_proj``、``up_proj``、``down_proj``），都不带偏置。
    ``forward(x (B, T, D)) -> (B, T, D)``::

        x = x + attn(norm1(x));  x = x + mlp(norm2(x))

    ``dropout`` 传给两个子层，由它们各自对自己的输出做 dropout；残差流本身从不做 dropout，
    也没有哪个张量会经过 dropout 两次。

    子检查（共 8 项）：``CASES`` 中每个配置一项（GQA；base 为 500 的多头注意力；只有一个
    词元的多查询注意力：检查输出、输入梯度和参数梯度）；输入没有被原地修改；eval 模式下
    dropout 0.5（应当不起作用）；训练模式下把两个子层的输出都置零（残差流应原样通过）；
    训练模式下一次只看一个子层（每个子层的输出都经过 dropout，且只做一次）。
    """,
    "check_lr_schedule": """检查学习率调度函数
    ``fn(step, *, max_lr, warmup_steps, total_steps, min_lr=0.0) -> float``。

    参考实现是 ``tfcourse.train.optim.lr_at``：当 ``step < warmup_steps`` 时，学习率为
    ``max_lr * (step + 1) / (warmup_steps + 1)``；从 ``warmup_steps`` 到 ``total_steps``，
    沿半个余弦从 ``max_lr`` 降到 ``min_lr``（余弦退火）；此后保持 ``min_lr``。检查在三组
    设置下逐步比较（有预热和无预热，非零的和默认的 ``min_lr``，步数超过 ``total_steps``）。
    如果是已知的常见错误，会直接点明（没有预热、预热差了一步、整个调度差了一步（即
    ``step - 1`` 或 ``step + 1``）、余弦没有降到 ``min_lr``、用线性衰减代替余弦）。
    """,
    "check_bpe_decode": """检查把词元解码回文本的函数
    ``fn(ids: list[int], merges: list[tuple[int, int]]) -> str``：每个 id 的字节（小于 256 的
    id 就是一个字节；``256 + i`` 是 ``merges[i]`` 两半的字节连在一起），全部连起来之后按 UTF-8
    解码一次，不完整的字符换成 U+FFFD。共用六个列表来测（字节和字节的合并、合并之上的合并、
    分在两个词元里的字符、末尾不完整的字符、空列表、随机文本的往返）；如果是已知的常见错误，
    会直接点明。
    """,
    "check_bpe_encode": """检查用学到的合并给文本编码的函数
    ``fn(text: str, merges: list[tuple[int, int]]) -> list[int]``：先按 GPT-2 的模式把文本切成块
    （``pre_split``，参考实现是 ``PATTERN.findall``），再把每个块的 UTF-8 字节按排名合并
    （只要块里还有学过的相邻对，就先合并最早学到的那一对；``merges[i]`` 变成 id ``256 + i``）。
    共用八段文本来测（一个块里两次合并、合并之上的合并、后学的合并出现得更多、后学的合并是更小
    的一对、跨块的合并、三个字节的字符、空文本、从随机文本学到的合并）；如果是已知的常见错误，
    会直接点明。
    """,
    "check_pre_split": """检查 GPT-2 式预切分的函数 ``fn(text: str) -> list[str]``：返回 ``text``
    的各个块（缩写；一串字母、一串数字或一串其他符号，前面各可带一个空格；空白，一串空白会把
    最后一个空格留给后面的单词），这些块连起来正好是原文。共用七段文本来测（单词和句点、字母
    紧挨着数字、缩写、成串的空格、ASCII 以外的字母、随机文本、空文本）；如果是已知的常见错误，
    会直接点明。
    """,
    "check_encode_with_special": """检查带特殊词元的编码函数
    ``fn(text: str, merges: list[tuple[int, int]], special: dict[str, int]) -> list[int]``：
    ``text`` 中出现的每个特殊字符串都整个变成它的 id（两个特殊字符串在同一位置开始时，取较长的
    那个），它们之间的文本由 ``bpe_encode`` 编码。共用六段文本来测（一个特殊词元、一个特殊
    字符串是另一个的开头、首尾相接的特殊词元、像特殊词元却不是的文本、没有特殊字符串、没有
    文本）；如果是已知的常见错误，会直接点明。
    """,
    "check_merge_pair": """检查字节对编码（BPE）中做一次合并的函数
    ``fn(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]``：它返回一个新列表，
    其中从左往右读到的每一处 ``pair`` 都换成 ``new_id``（``a a a`` 按 ``(a, a)`` 合并得到
    ``new a``）。共用六个列表来测（出现两次、有重叠的连续段、这一对在末尾、最后一个 id
    没被合并、一次都没出现、随机 id）；如果是已知的常见错误，会直接点明。只评判返回的列表。
    """,
    "check_most_frequent_pair": """检查统计最常见相邻对的函数
    ``fn(ids: list[int]) -> tuple[int, int]``：返回相邻 id 中出现次数最多的一对，每个位置都要
    计数（``a a a`` 里 ``(a, a)`` 出现两次），次数相同时取较小的那一对。共用七个列表来测
    （次数并列、连续重复段、起决定作用的一对在末尾、只有两个 id、随机 id）；如果是已知的
    常见错误，会直接点明。
    """,
    "check_multi_head_attention": """检查一个带因果掩码的多头自注意力类，参考实现是
    ``tfcourse.MultiHeadAttention``。

    接口：``cls(d_model, n_heads, *, max_seq_len, dropout=0.0, bias=True)``，一个
    ``nn.Module``，参数可以是融合的::

        qkv_proj.weight (3D, D), qkv_proj.bias (3D,)   # rows [0, D) make q, [D, 2D) k, [2D, 3D) v
        out_proj.weight (D, D),  out_proj.bias (D,)

    也可以是分开的 ``q_proj``、``k_proj``、``v_proj``（各为一个 ``Linear(D, D)``）加上
    ``out_proj``。第 ``h`` 个头拥有 q、k、v 的通道 ``[h * head_dim, (h + 1) * head_dim)``。
    ``bias=False`` 时不带偏置。``forward(x (B, T, D), return_weights=False)`` 返回
    ``out (B, T, D)``；``return_weights=True`` 时返回 ``(out, weights (B, H, T, T))``：
    即 dropout *之前*的、经过因果掩码的 softmax 权重。
    dropout（p=dropout）只在训练模式下生效，作用在注意力权重和/或输出上。

    子检查（共 7 项）：参数布局；输入没有被原地修改；(2, 5, 24)，4 个头（输出、权重、梯度）；
    批大小 1、T=1；d_model 12，3 个头，bias=False；eval 模式下 dropout=0.5（应当不起作用）；
    训练模式下 dropout=0.5（返回的权重取自 dropout 之前，而且 dropout 确实生效）。
    """,
    "check_permute_qk_rows": """检查 ``fn(weight, n_heads) -> weight``。

    接口：``weight`` 是一个 q 或 k 投影的权重，形状为 ``(n_heads * head_dim, d_in)``，它是用
    交错式 RoPE 训练出来的（每个头的通道按 ``(0, 1), (2, 3), ...`` 两两配对）。``fn`` 返回
    一个形状、dtype 和设备都相同的新张量，在每个头内部重新排列各行：先放偶数行，再放奇数行
    （维度对 ``(2i, 2i + 1)`` 移到第 ``(i, i + head_dim/2)`` 行），这正是前后两半
    （rotate-half）式 RoPE 所要求的布局。不得修改 ``weight``。
    """,
    "check_repeat_kv": """检查 ``fn(kv, n_rep) -> repeated``：为分组查询注意力复制键/值头。

    接口：``kv`` 的形状为 ``(B, H_kv, T, head_dim)``（``H_kv`` 个头的键或值），``n_rep``
    是一个正整数；结果的形状为 ``(B, H_kv * n_rep, T, head_dim)``，其中第 ``g`` 个键/值头
    出现在第 ``g*n_rep .. g*n_rep + n_rep - 1`` 个头上（按组排列，即 LLaMA 的布局：第 ``h``
    个查询头读取第 ``h // n_rep`` 个键/值头）。``n_rep=1`` 时返回一个与 ``kv`` 相等的张量；
    返回与 ``kv`` 共享内存的视图也可以。参考实现是 ``tfcourse.nn.attention.repeat_kv``。

    子检查（共 7 项）：(2, 2, 5, 4)，n_rep=3（输出与输入梯度）；MQA，一个键/值头，批大小 1；
    T=1；n_rep=1；一个非连续（转置过的）输入；放进因果注意力中，结果等于
    ``MultiHeadAttention(32, 8, n_kv_heads=2)``；输入没有被原地修改。能识别出的错误：
    用平铺代替分组、沿错误的维度重复，以及忽略 ``n_rep``。
    """,
    "check_rmsnorm": """检查一个 RMSNorm 类，参考实现是 ``tfcourse.RMSNorm``。

    接口：``cls(d_model, eps=1e-6)`` 是一个 ``nn.Module``，只有一个参数 ``weight (D,)``
    （没有偏置）；``forward(x)`` 的映射是 ``(..., D) -> (..., D)``::

        y = x / sqrt(mean(x ** 2) + eps) * weight              # over the last dimension

    子检查（共 6 项）：参数布局；输入没有被原地修改；x (2, 5, 16) 的输出与梯度；eps=0.1；
    批大小 1、T=1；较小的输入（0.03 * randn），这时默认的 eps 会产生影响。权重是随机的，
    不是 1。
    """,
    "check_rotary": """检查 ``fn(x, cos, sin) -> rotated``：旋转位置编码（rotate-half 约定）。

    接口：``x`` 的形状为 ``(B, H, T, head_dim)``（查询或键），``cos``/``sin`` 的形状为
    ``(T, head_dim)``，来自 ``rotary_cos_sin``；结果与 ``x`` 形状相同，计算方式为::

        x * cos + rotate_half(x) * sin,   rotate_half(x) = cat([-x2, x1], -1)

    其中 ``x1, x2`` 分别是最后一维的前一半和后一半。参考实现是 ``tfcourse.apply_rotary``
    （LLaMA / Hugging Face 的约定）。

    子检查（共 5 项）：x (2, 3, 5, 8) 的输出与梯度；head_dim=16，base=500；T=1，位于位置 0
    （应为恒等变换）；一张很长的表（T=64）；输入没有被原地修改。能识别出的错误：用了交错
    配对的约定、符号错误，以及位置差一。
    """,
    "check_rotary_attention": """检查一个 ``RotaryAttention`` 类，参考实现是带旋转位置编码和
    分组键/值头的 ``tfcourse.MultiHeadAttention``。

    接口：``cls(d_model, n_heads, *, max_seq_len, n_kv_heads=None, rope_base=10000.0,
    dropout=0.0, bias=False)``，一个 ``nn.Module``，含 ``qkv_proj``（``Linear(D, D + 2K)``，
    ``K = n_kv_heads * head_dim``；各行依次是 q、k、v）和 ``out_proj``（``Linear(D,
    D)``）；``forward(x (B, T, D)) -> (B, T, D)``，带因果掩码，q 和 k 按位置 0..T-1 旋转
    （rotate-half 布局），dropout 只作用在输出上。

    子检查（共 8 项）：``CASES`` 中每个配置一项（GQA、带偏置且 base 为 500 的 MHA、MQA：
    检查输出、输入梯度和参数梯度）；T=1；T = max_seq_len；eval 模式下 dropout 0.5；训练模式下，
    输出要与 eval 模式下的不同，并且大约一半被置零（经过 dropout 的是输出，而不是注意力权重）；
    输入没有被原地修改。
    """,
    "check_rotary_tables": """检查 ``fn(T, head_dim, base=10000.0) -> (cos, sin)``。

    接口：返回两个 float32 张量，形状都是 ``(T, head_dim)``，对应位置 ``t = 0 .. T-1``，
    采用 rotate-half 布局::

        inv_freq = 1 / base ** (arange(0, head_dim, 2) / head_dim)    # (head_dim/2,)
        angles   = outer(t, inv_freq)                                  # (T, head_dim/2)
        cos, sin = cat([angles, angles], -1).cos(), ....sin()          # (T, head_dim)

    其中角度要用 float64 计算（位置很大时，float32 会丢失有效数字）。
    参考实现是 ``tfcourse.rotary_cos_sin``。

    子检查（共 4 项）：T=6，head_dim=8，默认 base；T=5，head_dim=16，base=500；T=1；
    位置最大到 16383（在那里 float32 算出的角度大约偏差 1e-3）。评分时，尺寸和 base 都为
    该学员随机抽取（``cases.case_int``）。
    """,
    "check_swiglu": """检查一个 SwiGLU 前馈网络（MLP）类，参考实现是 ``tfcourse.SwiGLU``。

    接口：``cls(d_model, d_hidden=None, *, bias=False, dropout=0.0)``，一个 ``nn.Module``，
    含 ``gate_proj``、``up_proj``（``Linear(d_model, d_hidden)``）和 ``down_proj``
    （``Linear(d_hidden, d_model)``），沿用 Hugging Face LLaMA 的命名；除非 ``bias=True``，
    否则不带偏置；``d_hidden`` 默认为 ``swiglu_hidden_dim(d_model)``::

        y = dropout(down_proj(silu(gate_proj(x)) * up_proj(x)))     # (B, T, D) -> (B, T, D)

    子检查（共 8 项）：默认宽度下的参数布局；输入没有被原地修改；(2, 5, 16) 的输出与梯度；
    批大小 1、T=1；d_hidden=24；bias=True；eval 模式下 dropout=0.5（应当不起作用）；
    训练模式下 dropout=0.5（作用在输出上）。
    """,
    "check_swiglu_hidden_dim": """检查 LLaMA 的 SwiGLU 隐藏层宽度规则，参考实现是
    ``tfcourse.swiglu_hidden_dim``。

    接口：``fn(d_model) -> int``：先算 ``2/3 * 4 * d_model``（截断为整数），再*向上*取整到
    256 的倍数。``fn(4096) == 11008``（LLaMA-7B）。

    子检查（共 6 项）：d_model = 64, 128, 512, 768, 4096, 5120（评分时，128、512 和 768
    会换成为该学员随机抽取的宽度：``cases.case_int``）。
    """,
    "check_train_loop": """检查训练循环
    ``fn(model, optimizer, batches, *, max_lr, warmup_steps, max_norm) -> list[float]``。

    ``batches (steps, n_micro, B, T + 1)`` 存放词元 id：第 s 步在微批次 ``batches[s]`` 上训练，
    每个微批次拆成输入 ``[:, :-1]`` 和目标 ``[:, 1:]``。函数用 ``optimizer``（由调用方在模型
    参数上建好）原地训练 ``model``（一个 ``tfcourse.GPT``）：第 s 步在每个参数组里把学习率设为
    ``lr_at(s, max_lr=max_lr, warmup_steps=warmup_steps, total_steps=steps,
    min_lr=max_lr / 10)``；每个微批次调用一次 ``backward()``，反向传播的是该微批次的损失除以
    微批次的个数；做梯度裁剪，把梯度范数限制在 ``max_norm`` 以内；优化器走一步。函数返回每一步
    的损失（该步各微批次损失的平均值，在参数更新之前）。传进来的模型处于 eval 模式，并且带着
    过时的梯度。

    子检查（共 4 项）：每步 2 个微批次，AdamW 分成两个参数组（做权重衰减的和不做的）；每步
    1 个微批次，普通的 AdamW；2 个微批次，带动量的 SGD；模型最后处于训练模式，且批次没有被改动。
    ``max_norm`` 设在各步所见的梯度范数之间，使梯度裁剪在有些步起作用、在另一些步不起作用。
    如果是已知的常见错误，会直接点明（``MISTAKES``）。如果各步的损失和完全不做梯度裁剪时
    一样，检查会再调用一次函数，这次 ``max_norm`` 取最小梯度范数的百分之一：按值裁剪
    （``clip_grad_value_``）在这时会起作用，由此把它和不裁剪（或在优化器更新之后才裁剪）
    区分开。
    """,
    "check_transformer_block": """检查一个解码器块类，参考实现是 ``tfcourse.TransformerBlock``，
    Pre-LN 和 Post-LN 两种都查。

    接口：``cls(d_model, n_heads, *, max_seq_len, pre_ln=True, dropout=0.0)``，一个
    ``nn.Module``，含四个子模块，采用 tfcourse 的布局：

    - ``norm1``、``norm2``：两个各自独立的 LayerNorm（``weight``、``bias``；eps 1e-5），
    - ``attn``：带因果掩码的多头注意力，同 ``tfcourse.MultiHeadAttention``
      （``qkv_proj``/``out_proj``，或 ``q_proj``/``k_proj``/``v_proj``/``out_proj``），
    - ``mlp``：``tfcourse.FeedForward``（``fc_in`` 映射到 4 * d_model，精确 GELU，``fc_out``）。

    除了顺序错误和漏掉残差连接，还能诊断出：两个子层共用同一个归一化模块，以及 MLP 里用了
    GPT-2 的 tanh 近似 GELU（即使差异藏在容差之内也能发现）。

    ``forward(x (B, T, D)) -> (B, T, D)``::

        pre-LN:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))
        post-LN: x = norm1(x + attn(x));  x = norm2(x + mlp(x))

    ``dropout`` 传给各个子层（注意力权重、子层输出），只在训练模式下生效；残差流 ``x`` 本身
    从不做 dropout。

    子检查（共 8 项）：参数布局；输入没有被原地修改（Pre-LN 和 Post-LN 都查）；Pre-LN 下
    (2, 6, 16) 的输出与梯度；Pre-LN 下批大小 1、T=1；Post-LN 下 (2, 6, 16)；Post-LN 下
    批大小 1、T=1；eval 模式下 dropout=0.5（应当不起作用）；训练模式下 dropout=0.5，分别把
    各子层的输出投影置零（残差流必须原样通过）、不置零（dropout 必须生效），以及一次只看一个
    子层（每个子层的输出都经过 dropout，且只做一次：既不缺少、也不多出残差 dropout）。
    """,
}
