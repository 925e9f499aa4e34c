"""Realistic wrong vjps, as learners write them, and what check.py must say of each.

One row a mistake: the exercise, the vjp (its name, then its body as the learner writes it:
the signature is the exercise's), the hint rules allowed to speak (the first names the
mistake; the others, where given, say something else that is true of the same gradient),
and words the report must hold in English and in Korean. A row whose first rule is None, or
whose rules are (), is a mistake no rule names yet: its report holds only the numbers, and
the facts the rules after the None may add (how matmul's shapes line up).

tests/test_lab_mistakes.py grades every row: at least 90% get a hint naming the mistake,
in both languages, and no hint fires that the row does not allow (a misleading one).
The kinds (issue 35): sign, forgotten g, x for out, transposes, axes, keepdims, 1/N
factors, masks, diagonal-only softmax, layer norm's mean terms, swapped returns, wrong
dtype, a python float, None, and writes into what the vjp is handed.
"""

SOFTMAX_SUM = "(g * s).sum(axis=-1, keepdims=True)"
LN_MEANS = "g_hat.mean(axis=-1, keepdims=True) - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True)"
LN_RETURN = "return grad_x, (g * x_hat).sum(axis=0), g.sum(axis=0)"
ATTENTION = """d = q.shape[-1]
grad_v = {grad_v}
grad_weights = {grad_weights}
grad_scores = {grad_scores}
grad_q = {grad_q}
grad_k = {grad_k}
return {returned}"""
RIGHT = dict(grad_v="weights.T @ g", grad_weights="g @ v.T",
             grad_scores="weights * (grad_weights - (grad_weights * weights).sum(axis=-1, keepdims=True))",
             grad_q="grad_scores @ k / np.sqrt(d)", grad_k="grad_scores.T @ q / np.sqrt(d)",
             returned="grad_q, grad_k, grad_v")


def attention(**edits):
    """exercise 09's solution with some of its lines written otherwise."""
    return ATTENTION.format(**{**RIGHT, **edits})


def layer_norm(grad_x="(g_hat - " + LN_MEANS + ") / sigma", g_hat="g * w", returned=LN_RETURN):
    return f"g_hat = {g_hat}\ngrad_x = {grad_x}\n{returned}"


def embedding(fill="np.add.at(grad, ids, g)", start="grad = np.zeros_like(table)", returned="return grad"):
    return f"{start}\n{fill}\n{returned}"


def cross_entropy(subtract="grad[np.arange(len(targets)), targets] -= 1", start="grad = p.copy()",
                  returned="return g * grad / len(targets)"):
    return f"{start}\n{subtract}\n{returned}"


SIGN = (["the sign is flipped"], ["부호가 뒤집혔습니다"])
FORGOT_G = (["the upstream gradient g = dL/d(out) is missing"], ["g를 곱하세요"])
SAVED = (["which the forward saved for backward", "a vjp must not write into what the forward saved"],
         ["순전파가 역전파를 위해 남겨 둔 배열", "순전파가 남겨 둔 배열"])
KEEPDIMS = (["keep it, with keepdims=True (run so, your vjp gives the right gradient)"],
            ["keepdims=True로 축을 남겨 두세요 (그렇게 돌리면 vjp가 맞는 기울기를 냅니다)"])
FITS = (["does not fit", "made so, your vjp gives the right gradients"],
        ["맞지 않고", "그렇게 바꾸면 vjp가 맞는 기울기를 냅니다"])
NONE = (["returned None", "a function without `return` gives None"], ["None을 돌려주었습니다", "`return`이 없는 함수는"])
NONE_TUPLE = (["it returned None", "a function without `return` gives None"], ["돌려준 것: None", "`return`이 없는 함수는"])

MISTAKES = [
    # ---- 01: add and mul of numbers
    (1, "add_vjp", "return g, -g", ("sign",), *SIGN),
    (1, "add_vjp", "return 1.0, 1.0", ("forgot_g",), *FORGOT_G),
    (1, "add_vjp", "return g", (), ["must return a tuple of 2 gradients", "it returned an array of shape ()"],
     ["기울기 2개로 된 tuple", "shape ()인 배열"]),
    (1, "add_vjp", "grad_a, grad_b = g, g", ("returned_none",), *NONE_TUPLE),
    (1, "mul_vjp", "return g * a, g * b", ("other_input",), ["the two are swapped"], ["둘이 뒤바뀌었습니다"]),
    (1, "mul_vjp", "return b, a", ("forgot_g",), *FORGOT_G),
    (1, "mul_vjp", "return g * b, g * b", ("other_input",), ["yours for b is dL/da, the gradient of a"],
     ["b에 대한 내 값은 dL/da, 즉 a의 기울기입니다"]),
    (1, "mul_vjp", "return -g * b, -g * a", ("sign",), *SIGN),
    (1, "mul_vjp", "return g * a * b, g * a * b", (), ["mul, input a: dL/da is"], ["mul, 입력 a: dL/da의 값이"]),

    # ---- 02: a broadcast's vjp
    (2, "broadcast_vjp", "return g", ("not_summed_back",),
     ["x (3,) was broadcast to (4, 3)", "over axes (0,) (summed so, yours is right)"], ["축 (0,) 방향으로 더하세요"]),
    (2, "broadcast_vjp", "return g.sum(axis=0)", ("summed_wrong",),
     ["yours has the shape of a sum over axis 0 of (4, 3)", "x (4, 1) was stretched along axis 1"],
     ["(4, 3) 모양을 0번 축을 따라 더한 모양", "더해야 할 축은 1번"]),
    (2, "broadcast_vjp", "return g.sum()", ("summed_wrong", "returned_number"),
     ["yours has the shape of a sum over axis 0, 1 of (4, 3)", "x (3,) was stretched along axis 0"],
     ["0, 1번 축을 따라 더한 모양"]),
    (2, "broadcast_vjp", "leading = g.ndim - x.ndim\ng = g.sum(axis=tuple(range(leading)))\n"
                         "stretched = tuple(i for i, n in enumerate(x.shape) if n == 1 and g.shape[i] != 1)\n"
                         "return g.sum(axis=stretched)",
     ("summed_wrong",), ["your numbers are right (summed over axis 1), but x is (4, 1)", "keepdims=True"],
     ["숫자는 맞습니다(1번 축을 따라 더함)", "keepdims=True"]),
    (2, "broadcast_vjp", "leading = g.ndim - x.ndim\ng = g.mean(axis=tuple(range(leading)))\n"
                         "stretched = tuple(i for i, n in enumerate(x.shape) if n == 1 and g.shape[i] != 1)\n"
                         "return g.mean(axis=stretched, keepdims=True)",
     ("averaged",), ["yours is 1/4 of the right one", "a sum, not a mean"], ["1/4입니다", "평균이 아니라 합"]),
    (2, "broadcast_vjp", "leading = g.ndim - x.ndim\nreturn g.sum(axis=tuple(range(leading)))", ("not_summed_back",),
     ["x (4, 1) was broadcast to (4, 3)", "over axes (1,)"], ["축 (1,) 방향으로 더하세요"]),
    (2, "broadcast_vjp", "leading = g.ndim - x.ndim\ng = g.sum(axis=tuple(range(leading)))\n"
                         "stretched = tuple(i for i, n in enumerate(x.shape) if n == 1 and g.shape[i] != 1)\n"
                         "return -g.sum(axis=stretched, keepdims=True)", ("sign",), *SIGN),
    (2, "broadcast_vjp", "return g.sum(axis=0, keepdims=True)", ("summed_wrong",),
     ["your numbers are right (summed over axis 0), but you kept axis 0 with size 1", "sum it away without keepdims"],
     ["0번 축을 크기 1로 남겼습니다", "keepdims 없이 더해서 없애세요"]),

    # ---- 03: sum and mean
    (3, "sum_vjp", "return np.broadcast_to(g, x.shape)", ("sum_keepdims",),
     ["keepdims=False here: g (4,) is x (4, 3) with axis 1 summed away", "np.expand_dims(g, axis)"],
     ["여기서는 keepdims=False입니다", "np.expand_dims(g, axis)"]),
    (3, "sum_vjp", "return np.broadcast_to(np.expand_dims(g, axis), x.shape)", ("sum_keepdims",),
     ["keepdims=True here", "without np.expand_dims"], ["여기서는 keepdims=True입니다", "np.expand_dims 없이"]),
    (3, "sum_vjp", "return np.ones_like(x)", ("forgot_g",), *FORGOT_G),
    (3, "sum_vjp", "return g * np.ones_like(x)", ("sum_keepdims",), ["keepdims=False here: g (4,) is x (4, 3)"],
     ["여기서는 keepdims=False입니다"]),
    (3, "sum_vjp", "return g", ("sum_keepdims",), ["keepdims=False here: g (4,) is x (4, 3)"],
     ["여기서는 keepdims=False입니다"]),
    (3, "sum_vjp", "return g.sum()", ("returned_number", "sum_keepdims"),
     ["yours is one number (a float64), where dL/dx has x's shape (4, 3)"], ["내 값은 숫자 하나(float64)입니다"]),
    (3, "sum_vjp", "if not keepdims:\n    g = np.expand_dims(g, axis)\nreturn -np.broadcast_to(g, x.shape)",
     ("sign",), *SIGN),
    (3, "mean_vjp", "return sum_vjp(g, x, axis, keepdims)", ("mean_divisor",),
     ["yours is 3 times the right one", "the missing 1/n"], ["1/n이 빠졌습니다"]),
    (3, "mean_vjp", "return sum_vjp(g, x, axis, keepdims) / x.shape[0]", ("mean_divisor",),
     ["you divided by 4, x's size along axis 0; this mean averages along axis 1: n = 3"],
     ["나눈 수가 4인데", "n = 3"]),
    (3, "mean_vjp", "return sum_vjp(g, x, axis, keepdims) / x.size", ("mean_divisor",),
     ["you divided by 12, x's size along axis 0, 1; this mean averages along axis 1: n = 3"], ["나눈 수가 12인데"]),
    (3, "mean_vjp", "n = int(np.prod([x.shape[a] for a in axis]))\nreturn sum_vjp(g, x, axis, keepdims) * n",
     ("mean_divisor",), ["you multiplied by n where the mean divides by it"], ["n을 곱했습니다"]),
    (3, "mean_vjp", "n = x.shape[axis]\nreturn sum_vjp(g, x, axis, keepdims) / n", ("axis_as_index",),
     ["axis arrives as a tuple of ints, (1,)", "n = np.prod([x.shape[a] for a in axis])"],
     ["axis는 정수의 tuple (1,)로 들어옵니다"]),
    (3, "mean_vjp", "return sum_vjp(g, x, axis, keepdims) / len(axis)", ("mean_divisor",),
     ["yours is 3 times the right one", "the missing 1/n"], ["1/n이 빠졌습니다"]),
    (3, "mean_vjp", "n = int(np.prod([x.shape[a] for a in axis]))\nreturn np.ones_like(x) / n", ("forgot_g",),
     *FORGOT_G),
    (3, "mean_vjp", "n = int(np.prod([x.shape[a] for a in axis]))\nreturn np.broadcast_to(g, x.shape) / n",
     ("sum_keepdims",), ["keepdims=False here: g (4,) is x (4, 3)"], ["여기서는 keepdims=False입니다"]),

    # ---- 04: exp, log, tanh
    (4, "exp_vjp", "return g * x", ("mixed_up",), ["you used x where the formula needs out: d(e^x)/dx = e^x = out"],
     ["식에 out이 들어갈 자리에 x를 썼습니다"]),
    (4, "exp_vjp", "return out", ("forgot_g",), *FORGOT_G),
    (4, "exp_vjp", "return -g * out", ("sign",), *SIGN),
    (4, "exp_vjp", "return g * out,", ("returned_tuple",), ["in a tuple (or list) of one"], ["원소 하나짜리 tuple"]),
    (4, "exp_vjp", "return g * np.exp(out)", ("mixed_up",), ["you used out where the formula needs x"],
     ["식에 x가 들어갈 자리에 out을 썼습니다"]),
    (4, "exp_vjp", "out *= g\nreturn out", ("wrote_into",), ["exp: your vjp wrote into out", *SAVED[0]], SAVED[1]),
    (4, "exp_vjp", "g *= out\nreturn g", ("wrote_into",), ["exp: your vjp wrote into g", "a vjp must not write into g"],
     ["vjp는 g에 값을 써 넣으면 안 됩니다"]),
    (4, "exp_vjp", "grad = g * out", ("returned_none",), *NONE),
    (4, "log_vjp", "return g / out", ("mixed_up",), ["you used out where the formula needs x: d(ln x)/dx = 1/x"],
     ["식에 x가 들어갈 자리에 out을 썼습니다"]),
    (4, "log_vjp", "return 1 / x", ("forgot_g",), *FORGOT_G),
    (4, "log_vjp", "return g * x", ("multiplied_for_divided",), ["yours is g·x: d(ln x)/dx = 1/x"],
     ["내 값은 g·x입니다"]),
    (4, "log_vjp", "return g * np.log(x)", ("function_itself",),
     ["yours is g times log(x) itself, the function, where the chain rule wants its derivative"],
     ["함수를 곱한 것입니다"]),
    (4, "log_vjp", "return -g / x", ("sign",), *SIGN),
    (4, "log_vjp", "x **= -1\nreturn g * x", ("wrote_into",), ["log: your vjp wrote into x", *SAVED[0]], SAVED[1]),
    (4, "tanh_vjp", "return g * (1 - x ** 2)", ("mixed_up",), ["you used x where the formula needs out"],
     ["식에 out이 들어갈 자리에 x를 썼습니다"]),
    (4, "tanh_vjp", "return 1 - out ** 2", ("forgot_g",), *FORGOT_G),
    (4, "tanh_vjp", "return g * (1 - np.tanh(out) ** 2)", ("mixed_up",), ["you used out where the formula needs x"],
     ["식에 x가 들어갈 자리에 out을 썼습니다"]),
    (4, "tanh_vjp", "return g * out", ("function_itself",), ["yours is g times tanh(x) itself"], ["함수를 곱한 것입니다"]),
    (4, "tanh_vjp", "return g * (out ** 2 - 1)", ("sign",), *SIGN),
    (4, "tanh_vjp", "out **= 2\nreturn g * (1 - out)", ("wrote_into",), ["tanh: your vjp wrote into out", *SAVED[0]],
     SAVED[1]),
    (4, "tanh_vjp", "return g * 1 - out ** 2", (), ["tanh, input x:"], ["tanh, 입력 x:"]),

    # ---- 05: matmul and transpose
    (5, "matmul_vjp", "return g @ b.T, g.T @ a", ("transposed",),
     ["yours is the right gradient transposed: dL/db has b's shape (3, 2)"], ["맞는 기울기를 전치한 것입니다"]),
    (5, "matmul_vjp", "return g @ b, a.T @ g", ("product_fits",), ["g @ b ((4, 2) @ (3, 2)) does not fit, g @ bᵀ does",
                                                                   FITS[0][1]], FITS[1]),
    (5, "matmul_vjp", "return a.T @ g, g @ b.T", ("other_input",), ["the two are swapped"], ["둘이 뒤바뀌었습니다"]),
    (5, "matmul_vjp", "return g @ b.T, a @ g", ("product_fits",), ["a @ g ((4, 3) @ (4, 2)) does not fit, aᵀ @ g does"],
     FITS[1]),
    (5, "matmul_vjp", "return b.T @ g, a.T @ g", ("product_fits",), ["bᵀ @ g ((2, 3) @ (4, 2)) does not fit"], FITS[1]),
    (5, "matmul_vjp", "return g * b.T, a.T @ g", ("product_fits",), ["g * bᵀ", "g @ bᵀ does"], FITS[1]),
    (5, "matmul_vjp", "return -(g @ b.T), -(a.T @ g)", ("sign",), *SIGN),
    (5, "matmul_vjp", "return g @ b.T", (), ["must return a tuple of 2 gradients"], ["기울기 2개로 된 tuple"]),
    (5, "matmul_vjp", "return b.T, a.T", (None, "matmul_shapes"),
     ["matmul, input a: expected shape (4, 3) (a's shape), got (2, 3)", "line up the shapes"], ["기대한 shape는 (4, 3)"]),
    (5, "transpose_vjp", "return g", ("transposed",), ["yours is the right gradient transposed"],
     ["맞는 기울기를 전치한 것입니다"]),
    (5, "transpose_vjp", "return g.reshape(x.shape)", ("reshaped",),
     ["the right numbers in the wrong places", "A reshape keeps the numbers in their order"],
     ["숫자들이 엉뚱한 자리에", "reshape 대신 전치하세요"]),
    (5, "transpose_vjp", "return -g.T", ("sign",), *SIGN),

    # ---- 06: softmax
    (6, "softmax_vjp", "return s * g", ("softmax_step",),
     ["you have s·g: the δ_ij part of the Jacobian", "softmax's missing subtraction"],
     ["δ_ij 부분뿐입니다", "softmax에서 빠뜨린 뺄셈"]),
    (6, "softmax_vjp", "return g * s * (1 - s)", ("softmax_step",),
     ["you have g·s·(1 - s): the Jacobian's diagonal alone"], ["야코비안의 대각선뿐입니다"]),
    (6, "softmax_vjp", "return s * g - s * s * g", ("softmax_step",), ["the Jacobian's diagonal alone"],
     ["야코비안의 대각선뿐입니다"]),
    (6, "softmax_vjp", "return s * (g - (g * s).sum(axis=-1))", ("lost_keepdims",),
     ["(4,) is (4, 5) without its axis 1", *KEEPDIMS[0]], KEEPDIMS[1]),
    (6, "softmax_vjp", "return -s * ((g * s).sum(-1) - g)", ("lost_keepdims",),
     ["(4,) is (4, 5) without its axis 1", *KEEPDIMS[0]], KEEPDIMS[1]),
    (6, "softmax_vjp", "return s * g - s * (g * s).sum(axis=-1)", ("lost_keepdims",), KEEPDIMS[0], KEEPDIMS[1]),
    (6, "softmax_vjp", "return s * (g - (g * s).sum(axis=0, keepdims=True))", ("wrong_axis",),
     ["the sum in your vjp runs along axis 0"], ["0번 축을 따라 갑니다"]),
    (6, "softmax_vjp", "return s * (g - (g * s).sum(axis=1, keepdims=True))", ("wrong_axis",),
     ["the sum in your vjp runs along axis 1"], ["1번 축을 따라 갑니다"]),
    (6, "softmax_vjp", "return s * (g - (g * s).sum())", ("wrong_axis",),
     ["the sum in your vjp runs over the whole array"], ["배열 전체에 대해"]),
    (6, "softmax_vjp", "return s * (g - g.sum(axis=-1, keepdims=True))", ("softmax_step",),
     ["the sum you subtract is Σ_i g_i", "s goes inside the sum"], ["s가 합 안에 들어갑니다"]),
    (6, "softmax_vjp", "return s * (g - (g * s).mean(axis=-1, keepdims=True))", ("softmax_step",),
     ["you subtract each row's mean of g·s"], ["각 행의 g·s 평균을 뺐습니다"]),
    (6, "softmax_vjp", f"return s * (g + {SOFTMAX_SUM})", ("softmax_step",), ["it is subtracted"], ["빼야 합니다"]),
    (6, "softmax_vjp", f"return s * ({SOFTMAX_SUM} - g)", ("sign",), *SIGN),
    (6, "softmax_vjp", "return g * (s - s * s.sum(axis=-1, keepdims=True))", ("zero",),
     ["your gradient is zero everywhere but for rounding"], ["반올림 오차"]),
    (6, "softmax_vjp", f"s *= g - {SOFTMAX_SUM}\nreturn s", ("wrote_into",), ["softmax: your vjp wrote into s",
                                                                              *SAVED[0]], SAVED[1]),
    (6, "softmax_vjp", f"g -= {SOFTMAX_SUM}\nreturn s * g", ("wrote_into",), ["softmax: your vjp wrote into g"],
     ["vjp는 g에 값을 써 넣으면 안 됩니다"]),
    (6, "softmax_vjp", f"grad = s * (g - {SOFTMAX_SUM})", ("returned_none",), *NONE),

    # ---- 07: cross-entropy
    (7, "cross_entropy_vjp", "return g * p / len(targets)", ("cross_entropy_step",),
     ["the missing subtraction: at each row's target"], ["빠뜨린 뺄셈"]),
    (7, "cross_entropy_vjp", "return g * p", ("cross_entropy_step",), ["the missing subtraction", "the missing 1/N too"],
     ["빠뜨린 뺄셈", "1/N도 빠졌습니다"]),
    (7, "cross_entropy_vjp", cross_entropy(returned="return g * grad"), ("cross_entropy_step",),
     ["the loss is the mean over the 4 rows: the missing 1/N"], ["1/N이 빠졌습니다"]),
    (7, "cross_entropy_vjp", cross_entropy(returned="return g * grad / grad.size"), ("cross_entropy_step",),
     ["you divided by 20, the number of logits (N·C)"], ["logits의 개수(N·C)로 나눴습니다"]),
    (7, "cross_entropy_vjp", cross_entropy(start="grad = logits.copy()"), ("cross_entropy_step",),
     ["yours is built from the logits"], ["logits를 쓴 자리에 p를 쓰세요"]),
    (7, "cross_entropy_vjp", cross_entropy(subtract="grad[:, targets] -= 1"), ("cross_entropy_step",),
     ["you subtracted 1 in every row at every target's column"], ["모든 행에서 모든 정답의 열에 1을 뺐습니다"]),
    (7, "cross_entropy_vjp", cross_entropy(subtract="grad[targets] -= 1"), ("targets_as_rows",),
     ["index 4 is past axis 0's 4 rows, and 4 is one of the targets"], ["인덱스 4는 축 0의 행 4개를 넘어서고"]),
    (7, "cross_entropy_vjp", cross_entropy(returned="return -g * grad / len(targets)"), ("sign",), *SIGN),
    (7, "cross_entropy_vjp", cross_entropy(returned="return grad / len(targets)"), ("forgot_g",), *FORGOT_G),
    (7, "cross_entropy_vjp", "return g", ("g_shape",), ["that is g's shape: the forward summed axis 0, 1 away"],
     ["그것은 g의 shape입니다"]),
    (7, "cross_entropy_vjp", cross_entropy(start="grad = p"), ("wrote_into",),
     ["cross_entropy: your vjp wrote into p", *SAVED[0]], SAVED[1]),
    (7, "cross_entropy_vjp", cross_entropy(start="grad = np.zeros(p.shape, dtype=int)\ngrad += p"),
     ("cast_into_integers",), ["numpy would not put float64 values into an array of int64"],
     ["numpy가 float64 값을 int64 배열에 넣지 않았습니다"]),
    (7, "cross_entropy_vjp", cross_entropy(returned="grad = g * grad / len(targets)"), ("returned_none",), *NONE),
    (7, "cross_entropy_vjp", "one_hot = np.eye(p.shape[1])[targets]\nreturn g * (one_hot - p) / len(targets)",
     ("sign",), *SIGN),

    # ---- 08: layer norm
    (8, "layer_norm_vjp", "return g * w / sigma, (g * x_hat).sum(axis=0), g.sum(axis=0)", ("layer_norm_step",),
     ["you treated μ and σ as constants"], ["μ와 σ를 상수로 다뤘습니다"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True)) / sigma"),
     ("layer_norm_step",), ["the path through μ is missing"], ["μ를 거치는 길이 빠졌습니다"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - g_hat.mean(axis=-1, keepdims=True)) / sigma"),
     ("layer_norm_step",), ["the path through σ is missing"], ["σ를 거치는 길이 빠졌습니다"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat + g_hat.mean(axis=-1, keepdims=True) - x_hat * (g_hat * x_hat)"
                                            ".mean(axis=-1, keepdims=True)) / sigma"),
     ("layer_norm_step",), ["the sign of the μ term"], ["μ 항의 부호"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - g_hat.mean(axis=-1, keepdims=True) + x_hat * (g_hat * x_hat)"
                                            ".mean(axis=-1, keepdims=True)) / sigma"),
     ("layer_norm_step",), ["the sign of the σ term"], ["σ 항의 부호"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - g_hat.sum(axis=-1, keepdims=True) - x_hat * (g_hat * x_hat)"
                                            ".sum(axis=-1, keepdims=True)) / sigma"),
     ("layer_norm_step",), ["a sum over the row where the formula has a mean", "(C = 5)"], ["(C = 5)"]),
    (8, "layer_norm_vjp", layer_norm(g_hat="g"), ("layer_norm_step",), ["w is missing"], ["w가 빠졌습니다"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="g_hat - " + LN_MEANS), ("layer_norm_step",),
     ["yours is not divided by σ"], ["σ로 나누지 않았습니다"]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - g_hat.mean(axis=-1) - x_hat * (g_hat * x_hat).mean(axis=-1, "
                                            "keepdims=True)) / sigma"),
     ("lost_keepdims",), ["(4,) is (4, 5) without its axis 1", *KEEPDIMS[0]], KEEPDIMS[1]),
    (8, "layer_norm_vjp", layer_norm(grad_x="(g_hat - g_hat.mean(axis=0, keepdims=True) - x_hat * (g_hat * x_hat)"
                                            ".mean(axis=0, keepdims=True)) / sigma"),
     ("wrong_axis",), ["the means in your dL/dx run along axis 0"], ["0번 축을 따라 갑니다"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, g * x_hat, g.sum(axis=0)"), ("not_summed_back",),
     ["w (5,) was broadcast to (4, 5)"], ["축 (0,) 방향으로 더하세요"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, (g * x_hat).sum(axis=1), g.sum(axis=1)"),
     ("summed_wrong",), ["yours has the shape of a sum over axis 1 of (4, 5)", "w (5,) was stretched along axis 0"],
     ["1번 축을 따라 더한 모양"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, (g * x_hat).sum(axis=0), g.sum(axis=0, keepdims=True)"),
     ("summed_wrong",), ["but you kept axis 0 with size 1", "sum it away without keepdims"],
     ["keepdims 없이 더해서 없애세요"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, (g * x_hat).mean(axis=0), g.mean(axis=0)"),
     ("averaged",), ["yours is 1/4 of the right one"], ["1/4입니다"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, g.sum(axis=0), (g * x_hat).sum(axis=0)"),
     ("other_input",), ["the two are swapped"], ["둘이 뒤바뀌었습니다"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, g.sum(axis=0), g.sum(axis=0)"), ("other_input",),
     ["yours for w is dL/db, the gradient of b"], ["w에 대한 내 값은 dL/db"]),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, x_hat.sum(axis=0), g.sum(axis=0)"), ("forgot_g",),
     *FORGOT_G),
    (8, "layer_norm_vjp", layer_norm(returned="return grad_x, (g * x_hat).sum(axis=0)"), (),
     ["must return a tuple of 3 gradients"], ["기울기 3개로 된 tuple"]),
    (8, "layer_norm_vjp", layer_norm(returned="grads = grad_x, (g * x_hat).sum(axis=0), g.sum(axis=0)"),
     ("returned_none",), *NONE_TUPLE),
    (8, "layer_norm_vjp", "x_hat *= g * w\n" + layer_norm(), ("wrote_into",),
     ["layer_norm: your vjp wrote into x_hat", *SAVED[0]], SAVED[1]),
    (8, "layer_norm_vjp", layer_norm(grad_x="-(g_hat - " + LN_MEANS + ") / sigma"), ("sign",), *SIGN),

    # ---- 09: attention
    (9, "attention_vjp", attention(grad_v="weights @ g"), ("attention_step",),
     ["step 4 (weighted sum, out = weights @ v): dL/dv = weightsᵀ @ g"], ["dL/dv = weightsᵀ @ g입니다"]),
    (9, "attention_vjp", attention(grad_scores="weights * grad_weights"), ("attention_step",),
     ["step 3 (softmax): you have weights·dL/dweights, the δ part"], ["δ 부분뿐입니다"]),
    (9, "attention_vjp", attention(grad_scores="grad_weights * weights * (1 - weights)"), ("attention_step",),
     ["step 3 (softmax): you have weights·(1 - weights)·dL/dweights, the Jacobian's diagonal alone"],
     ["야코비안의 대각선뿐입니다"]),
    (9, "attention_vjp", attention(grad_scores="weights * (grad_weights - (grad_weights * weights).sum(axis=-1))"),
     ("lost_keepdims",), ["numpy lined what was left up with another axis, without an error", *KEEPDIMS[0]],
     KEEPDIMS[1]),
    (9, "attention_vjp", attention(grad_scores="weights * (grad_weights - (grad_weights * weights).sum(axis=0, "
                                               "keepdims=True))"),
     ("attention_step",), ["step 3 (softmax): your sum runs along axis 0"], ["합이 축 0을 따라"]),
    (9, "attention_vjp", attention(grad_q="grad_scores @ k", grad_k="grad_scores.T @ q"), ("attention_step",),
     ["the 1/√d of the scores"], ["점수의 1/√d"]),
    (9, "attention_vjp", attention(grad_q="grad_scores @ k / d", grad_k="grad_scores.T @ q / d"), ("attention_step",),
     ["the 1/√d of the scores"], ["점수의 1/√d"]),
    (9, "attention_vjp", attention(grad_q="grad_scores.T @ k / np.sqrt(d)"), ("attention_step",),
     ["dL/dq = dL/dscores @ k / √d, with no transpose"], ["전치가 없습니다"]),
    (9, "attention_vjp", attention(grad_k="grad_scores @ q / np.sqrt(d)"), ("attention_step",),
     ["dL/dk = dL/dscoresᵀ @ q / √d"], ["dL/dk = dL/dscoresᵀ @ q / √d입니다"]),
    (9, "attention_vjp", "d = q.shape[-1]\ne = np.exp(q @ k.T / np.sqrt(d))\nweights = e / e.sum(axis=-1, "
                         "keepdims=True)\n" + attention(), ("attention_step",),
     ["step 2 (mask): your weights have no mask"], ["가중치에 마스크가 없습니다"]),
    (9, "attention_vjp", attention(grad_scores="np.where(np.triu(np.ones(weights.shape, dtype=bool), k=1), -np.inf, "
                                               "weights * (grad_weights - (grad_weights * weights).sum(axis=-1, "
                                               "keepdims=True)))"),
     ("attention_mask_inf",), ["step 2 (mask): dL/dq has inf or nan"], ["inf나 nan이 있습니다"]),
    (9, "attention_vjp", attention(returned="grad_k, grad_q, grad_v"), ("other_input",), ["the two are swapped"],
     ["둘이 뒤바뀌었습니다"]),
    (9, "attention_vjp", attention(grad_v="g @ weights"), ("product_fits",),
     ["g @ weights ((4, 3) @ (4, 4)) does not fit, weightsᵀ @ g does"], FITS[1]),
    (9, "attention_vjp", attention(grad_weights="g @ v"), ("product_fits",), ["g @ v ((4, 3) @ (4, 3)) does not fit"],
     FITS[1]),
    (9, "attention_vjp", attention(returned="-grad_q, -grad_k, -grad_v"), ("sign",), *SIGN),
    (9, "attention_vjp", "weights *= 2\n" + attention(), ("wrote_into",), ["attention: your vjp wrote into weights",
                                                                          *SAVED[0]], SAVED[1]),
    (9, "attention_vjp", attention(returned="grad_q, grad_k"), (), ["must return a tuple of 3 gradients"],
     ["기울기 3개로 된 tuple"]),

    # ---- 10: the embedding
    (10, "embedding_vjp", embedding(fill="grad[ids] += g"), ("embedding_repeats",),
     ["ids repeat (id 1 3 times)", "np.add.at(grad, ids, g) adds them all"], ["np.add.at(grad, ids, g)는 모두 더합니다"]),
    (10, "embedding_vjp", embedding(fill="grad[ids] = g"), ("embedding_repeats",), ["yours keeps one row of g for a repeated id, as `grad[ids] += g` or `grad[ids] = g` does"],
     ["반복된 id에 g의 행을 하나만"]),
    (10, "embedding_vjp", embedding(fill="for i, row in enumerate(ids):\n    grad[row] = g[i]"), ("embedding_repeats",),
     ["ids repeat (id 1 3 times)"], ["ids에 같은 id가 여러 번 나옵니다"]),
    (10, "embedding_vjp", "return g", ("embedding_rows",), ["one row per id (5 of them)"], ["id마다 한 행씩(5개)"]),
    (10, "embedding_vjp", embedding(returned="return np.add.at(grad, ids, g)", fill="pass"), ("returned_none",),
     *NONE),
    (10, "embedding_vjp", embedding(start="grad = np.zeros(table.shape, dtype=int)"), ("integer_values",),
     ["your gradient's dtype is int64"], ["내 기울기의 dtype이 int64입니다"]),
    (10, "embedding_vjp", embedding(start="grad = np.zeros(table.shape, dtype=int)", fill="grad[ids] += g"),
     ("cast_into_integers",), ["numpy would not put float64 values into an array of int64"],
     ["정수 배열은 기울기의 소수 부분을 담지 못합니다"]),
    (10, "embedding_vjp", "np.add.at(table, ids, g)\nreturn table", ("wrote_into",),
     ["embedding: your vjp wrote into table", *SAVED[0]], SAVED[1]),
    (10, "embedding_vjp", embedding(returned="return -grad"), ("sign",), *SIGN),
    (10, "embedding_vjp", embedding(fill="np.add.at(grad, ids, 1)"), ("forgot_g",), *FORGOT_G),
]
