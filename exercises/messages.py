"""check.py's words, in English and Korean: every line it prints is one of MESSAGES, by key.

    say("wrong_shape", op="matmul", name="b", want=(3, 2), got=(2, 3))

gives the line in `language` ("en" or "ko"), which check.py sets from --lang or else from
the locale (from_locale: LC_ALL, LC_MESSAGES or LANG starting with "ko" is Korean). A new
line is a new key with both texts; tests/test_lab.py checks that each has both, with the
same {fields}.
"""
import os

LANGUAGES = ("en", "ko")
language = "en"


def from_locale(environ=os.environ):
    """"ko" where the first of LC_ALL, LC_MESSAGES, LANG that is set starts with ko, else "en"."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if environ.get(name):
            return "ko" if environ[name].lower().startswith("ko") else "en"
    return "en"


def say(key, **fields):
    """MESSAGES[key] in the language set, its {fields} filled in."""
    return MESSAGES[key][language].format(**fields)


MESSAGES = {
    # ---- the verdicts
    "passes": {"en": "passes", "ko": "통과"},
    "not started": {"en": "not started", "ko": "시작 전"},
    "needs work": {"en": "needs work", "ko": "고칠 곳 있음"},

    # ---- the command line
    "description": {
        "en": "Grade the lab's exercises: \"not started\", \"passes\", or what is wrong, where, and a hint.",
        "ko": "실습 연습 문제를 채점합니다: \"시작 전\", \"통과\", 또는 무엇이 어디서 틀렸는지와 힌트."},
    "help_numbers": {
        "en": "the exercises to grade (default: all of them)",
        "ko": "채점할 연습 문제 번호 (기본값: 전부)"},
    "help_solutions": {
        "en": "grade exercises/solutions/ instead of your vjps",
        "ko": "내 vjp 대신 exercises/solutions/의 풀이를 채점"},
    "help_timeout": {
        "en": "the seconds each check may take before it is stopped (default {seconds:g})",
        "ko": "검사 하나가 멈추기 전까지 쓸 수 있는 시간, 초 단위 (기본값 {seconds:g})"},
    "help_lang": {
        "en": "the language of the report (default: from LC_ALL or LANG)",
        "ko": "보고서의 언어 (기본값: LC_ALL 또는 LANG에서)"},
    "no_such_exercise": {
        "en": "no exercise {number}: there are {first} to {last}",
        "ko": "{number}번 연습 문제는 없습니다: {first}번부터 {last}번까지 있습니다"},
    "bad_timeout": {
        "en": "--timeout wants a number of seconds above 0 and at most {longest:g}, not {text!r}",
        "ko": "--timeout에는 0보다 크고 {longest:g} 이하인 초 단위 숫자를 주세요 (받은 값: {text!r})"},
    "interrupted": {
        "en": "stopped (Ctrl-C): the exercises not reported above were not graded",
        "ko": "중단됨 (Ctrl-C): 위에 나오지 않은 연습 문제는 채점하지 않았습니다"},
    "terminated": {
        "en": "stopped ({signal}): the exercises not reported above were not graded",
        "ko": "중단됨 ({signal}): 위에 나오지 않은 연습 문제는 채점하지 않았습니다"},

    # ---- what happened to an exercise or a check
    "loading": {"en": "loading {file}", "ko": "{file} 불러오기"},
    "starting_worker": {"en": "starting the worker process", "ko": "채점 프로세스 시작"},
    "does_not_load": {"en": "the file does not load: {error}", "ko": "파일을 불러오지 못합니다: {error}"},
    "timed_out": {
        "en": "{what}: did not return within {seconds:g} s, so it was stopped: an endless loop, or a wait for "
              "something that never comes? (python exercises/check.py --timeout SECONDS gives each check longer)",
        "ko": "{what}: {seconds:g}초 안에 끝나지 않아 멈췄습니다. 끝나지 않는 반복문이거나, 오지 않을 무언가를 "
              "기다리고 있지 않나요? (python exercises/check.py --timeout 30 처럼 초를 주면 검사마다 시간을 더 줄 "
              "수 있습니다)"},
    "worker_died": {
        "en": "{what}: the process grading it ended without a word (exit status {code}): os._exit(), a kill, or a "
              "crash inside numpy's C code",
        "ko": "{what}: 채점하던 프로세스가 아무 말 없이 끝났습니다 (종료 상태 {code}): os._exit(), kill, 또는 "
              "numpy C 코드 안의 충돌일 수 있습니다"},
    "unreadable": {
        "en": "{what}: check.py could not read what the process grading it sent ({error}): an exercise must not "
              "write into check.py's pipe",
        "ko": "{what}: 채점하던 프로세스가 보낸 것을 check.py가 읽을 수 없습니다 ({error}): 연습 문제는 check.py의 "
              "파이프에 무언가를 써 넣으면 안 됩니다"},
    "replaced": {
        "en": "{file} replaced what the grader computes with: {names}. A grade made with them cannot be trusted: "
              "an exercise writes its own vjps and leaves numpy, tensorgrad and check.py as they are; take that out",
        "ko": "{file}이(가) 채점기가 계산에 쓰는 것을 바꿔 놓았습니다: {names}. 그것으로 매긴 점수는 믿을 수 "
              "없습니다. 연습 문제는 자기 vjp만 작성하고 numpy, tensorgrad, check.py는 그대로 두어야 합니다. 그 "
              "코드를 지우세요"},
    "and_more": {"en": "and {count} more", "ko": "그 밖에 {count}개"},
    "recheck_values": {
        "en": "{op}, input {name}: the process grading it passed this gradient, but check.py's own comparison, in "
              "a process your code never runs in, finds {bad} of {size} elements wrong; element {where} of "
              "dL/d{name} is {want:.6g} by finite differences, yours {got:.6g}",
        "ko": "{op}, 입력 {name}: 채점하던 프로세스는 이 기울기를 통과시켰지만, 내 코드가 돌지 않는 프로세스에서 "
              "check.py가 직접 비교해 보니 원소 {size}개 중 {bad}개가 틀렸습니다. dL/d{name}의 원소 {where}: 유한 "
              "차분으로 {want:.6g}, 내 값 {got:.6g}"},
    "recheck_shape": {
        "en": "{op}, input {name}: the process grading it passed this gradient, but check.py's own comparison, in "
              "a process your code never runs in, finds {got} where dL/d{name} has the shape {want}",
        "ko": "{op}, 입력 {name}: 채점하던 프로세스는 이 기울기를 통과시켰지만, 내 코드가 돌지 않는 프로세스에서 "
              "check.py가 직접 비교해 보니 dL/d{name}의 shape {want} 자리에 {got}이(가) 있습니다"},
    "stopped": {
        "en": "{what}: {how}; an exercise must return (its vjps their gradients), never end the program: take the "
              "exit out",
        "ko": "{what}: {how}. 연습 문제는 값을 돌려주어야지(vjp는 기울기를), 프로그램을 끝내면 안 됩니다: 그 종료 "
              "코드를 지우세요"},
    "how_exit": {
        "en": "it ended the program: SystemExit({code!r}), from exit(), sys.exit() or raise SystemExit",
        "ko": "프로그램을 끝냈습니다: SystemExit({code!r}) (exit(), sys.exit() 또는 raise SystemExit)"},
    "how_interrupt": {"en": "it raised KeyboardInterrupt", "ko": "KeyboardInterrupt를 일으켰습니다"},
    "forward_raised": {"en": "{op}: its forward raised {error}", "ko": "{op}: 순전파에서 오류가 났습니다: {error}"},
    "waits": {
        "en": "{what}: waits until the checks above pass",
        "ko": "{what}: 위의 검사들이 통과할 때까지 기다립니다"},
    "the_whole": {"en": "{op} (the whole)", "ko": "{op} (전체)"},
    "op_not_started": {"en": "{op}: not started ({todo})", "ko": "{op}: 시작 전 ({todo})"},
    "needs": {"en": "{what}: needs {todo}", "ko": "{what}: 먼저 할 일: {todo}"},
    "write_it": {"en": "exercise {number}: write {function}", "ko": "연습 {number}: {function} 함수를 작성하세요"},
    "whole_raised": {"en": "{what}: raised {error}", "ko": "{what}: 오류가 났습니다: {error}"},
    "vjp_raised": {"en": "{op}: your vjp raised {error}", "ko": "{op}: vjp에서 오류가 났습니다: {error}"},
    "it_was_given": {"en": "  it was given {given}", "ko": "  vjp가 받은 것: {given}"},
    "malformed": {
        "en": "the vjp must return a tuple of {count} gradients, one per input ({grads}); it returned {what}",
        "ko": "vjp는 입력마다 하나씩, 기울기 {count}개로 된 tuple({grads})를 돌려주어야 합니다. 돌려준 것: {what}"},
    "what_sequence": {"en": "a {kind} of {count}", "ko": "길이 {count}인 {kind}"},
    "what_array": {"en": "an array of shape {shape}", "ko": "shape {shape}인 배열"},
    "what_other": {"en": "a {kind}", "ko": "{kind} 값"},
    "seed": {
        "en": "  (the inputs, then g, drawn from np.random.default_rng({seed}); L = Σ g·out; finite differences "
              "with ε = {eps:g})",
        "ko": "  (입력과 g는 이 순서로 np.random.default_rng({seed})에서 뽑았습니다. L = Σ g·out, 유한 차분의 ε = "
              "{eps:g})"},

    # ---- how a gradient differs
    "returned_none": {
        "en": "{op}, input {name}: your vjp returned None for it; return dL/d{name}, of shape {shape}",
        "ko": "{op}, 입력 {name}: vjp가 None을 돌려주었습니다. 돌려줄 것: shape가 {shape}인 dL/d{name}"},
    "returned_what": {
        "en": "{op}, input {name}: your vjp returned {what}, not an array of {name}'s shape {shape}",
        "ko": "{op}, 입력 {name}: vjp가 돌려준 것은 {what}입니다. {name}의 shape {shape}인 배열이어야 합니다"},
    "wrong_shape": {
        "en": "{op}, input {name}: expected shape {want} ({name}'s shape), got {got}",
        "ko": "{op}, 입력 {name}: 기대한 shape는 {want}({name}의 shape), 받은 shape는 {got}"},
    "wrong_number": {
        "en": "{op}, input {name}: dL/d{name} is {want:.6g} by finite differences, yours {got:.6g}",
        "ko": "{op}, 입력 {name}: dL/d{name}의 값이 유한 차분으로 {want:.6g}, 내 값 {got:.6g}"},
    "wrong_elements": {
        "en": "{op}, input {name}: {bad} of {size} elements are wrong; element {where} of dL/d{name} is {want:.6g} "
              "by finite differences, yours {got:.6g}",
        "ko": "{op}, 입력 {name}: 원소 {size}개 중 {bad}개가 틀렸습니다. dL/d{name}의 원소 {where}: 유한 차분으로 "
              "{want:.6g}, 내 값 {got:.6g}"},

    # ---- the hints (check.py's HINTS and FALLBACKS)
    "hint_wrote_into_g": {
        "en": "a vjp must not write into g: it may be shared (backward hands the same g to each input's vjp, and "
              "it is the output's .grad), so `g *= out` or `g -= ...` would change it for all of them: compute a "
              "new array instead (`g * out`, `g - ...`)",
        "ko": "vjp는 g에 값을 써 넣으면 안 됩니다. g는 공유될 수 있기 때문입니다(backward는 같은 g를 입력마다 "
              "vjp에 넘기고, g는 출력의 .grad이기도 합니다). `g *= out`이나 `g -= ...`은 그 모두를 바꿔 버립니다: "
              "새 배열을 만드세요 (`g * out`, `g - ...`)"},
    "hint_lost_keepdims": {
        "en": "{small} is {big} without its axis {axes}: a sum or mean in your vjp dropped that axis (keepdims is "
              "False by default), so numpy cannot line it up with {big} again: keep it, with keepdims=True (run "
              "so, your vjp gives the right gradient)",
        "ko": "shape {small}: {big} 모양에서 {axes}번 축이 빠진 모양입니다. vjp 안의 sum이나 mean이 그 축을 없앴기 때문에(keepdims의 기본값은 "
              "False) numpy가 다시 {big} 모양에 맞춰 브로드캐스트하지 못합니다: keepdims=True로 축을 남겨 두세요 (그렇게 돌리면 vjp가 맞는 기울기를 냅니다)"},
    "hint_keepdims_false": {
        "en": "keepdims=False here: g {g} is x {x} with axis {axes} summed away; put it back with "
              "np.expand_dims(g, axis) (axis arrives as the tuple {axis}), then np.broadcast_to(..., x.shape)",
        "ko": "여기서는 keepdims=False입니다: g {g}는 x {x}에서 {axes}번 축을 더해 없앤 모양입니다. "
              "np.expand_dims(g, axis)로 그 축을 되살린 다음(axis는 tuple {axis} 형태로 들어옵니다) "
              "np.broadcast_to(..., x.shape)로 펼치세요"},
    "hint_keepdims_true": {
        "en": "keepdims=True here: g {g} still has x's {ndim} axes, with size 1 where summed (axis {axes}): "
              "np.broadcast_to(g, x.shape) as it is, without np.expand_dims",
        "ko": "여기서는 keepdims=True입니다: g {g}는 x의 축 {ndim}개를 그대로 가지고 있고, 더한 축({axes})만 "
              "크기가 1입니다. np.expand_dims 없이 그대로 np.broadcast_to(g, x.shape) 하세요"},
    "hint_forgot_g": {
        "en": "yours is the local derivative d(out)/d{name} alone: the upstream gradient g = dL/d(out) is missing. "
              "The chain rule takes g times the local derivative: multiply by g",
        "ko": "내 값은 국소 미분 d(out)/d{name}뿐입니다: 위에서 내려온 기울기 g = dL/d(out)이 빠졌습니다. 연쇄 "
              "법칙은 g에 국소 미분을 곱합니다: g를 곱하세요"},
    "hint_zero": {
        "en": "your gradient is zero everywhere, and the right one is not: one of your formula's factors is 0, or "
              "its terms cancel",
        "ko": "내 기울기는 모든 곳에서 0인데, 맞는 기울기는 그렇지 않습니다: 식의 인수 하나가 0이거나, 항들이 서로 "
              "지워집니다"},
    "hint_nearly_zero": {
        "en": "your gradient is zero everywhere but for rounding (at most {biggest:.1e}), and the right one is "
              "not: the terms of your formula cancel. A row of softmax's Jacobian, or of p minus the one-hot, sums "
              "to 0: a sum over such a row taken before g multiplies it gives this",
        "ko": "내 기울기는 반올림 오차({biggest:.1e} 이하)를 빼면 모든 곳에서 0인데, 맞는 기울기는 그렇지 않습니다: 식의 항들이 서로 지워집니다. softmax 야코비안의 한 "
              "행이나 p에서 원-핫을 뺀 것의 한 행은 더하면 0입니다: g를 곱하기 전에 그런 행을 따라 더하면 이렇게 됩니다"},
    "hint_swapped": {
        "en": "yours for {name} is dL/d{other}, and yours for {other} is dL/d{name}: the two are swapped; return "
              "them in the order of the inputs",
        "ko": "{name}에 대한 내 값은 dL/d{other}이고, {other}에 대한 내 값은 dL/d{name}입니다: 둘이 뒤바뀌었습니다. 입력의 순서대로 돌려주세요"},
    "hint_transposed": {
        "en": "yours is the right gradient transposed: dL/d{name} has {name}'s shape {want}, not the transposed one",
        "ko": "내 값은 맞는 기울기를 전치한 것입니다: dL/d{name}의 shape는 {name}의 shape {want}이고, 그 전치가 아닙니다"},
    "hint_not_summed_back": {
        "en": "{name} {want} was broadcast to {out} in the forward, so each of its elements was used in several "
              "places: the chain rule sums their gradients, over axes {axes} (summed so, yours is right)",
        "ko": "{name} {want}: 순전파에서 {out} 모양으로 브로드캐스트되었으므로, 원소 하나하나가 여러 곳에서 쓰였습니다. 연쇄 법칙은 그 기울기들을 더합니다: 축 {axes} "
              "방향으로 더하세요 (그렇게 더하면 내 값이 맞습니다)"},
    "hint_sum_wrong_axes": {
        "en": "yours has the shape of a sum over axis {yours} of {g}; {name} {want} was stretched along axis "
              "{right} of {g} in the forward: those are the axes to sum over",
        "ko": "내 값의 shape는 {g} 모양을 {yours}번 축을 따라 더한 모양입니다. {name} {want}: 순전파에서 {g} 모양의 {right}번 축을 따라 늘어났습니다. "
              "더해야 할 축은 {right}번입니다"},
    "hint_g_shape": {
        "en": "that is g's shape: the forward summed axis {axes} away, so dL/d{name} has g's values spread back "
              "over them (times the local derivative), in {name}'s shape {want}",
        "ko": "그것은 g의 shape입니다: 순전파가 {axes}번 축을 더해서 없앴으므로, dL/d{name}은 g의 값을 그 축들을 따라 다시 펼친 것(에 국소 미분을 곱한 것)이고, "
              "shape는 {name}의 shape인 {want}입니다"},
    "hint_needs_out": {
        "en": "you used x where the formula needs out: {rule}; the forward kept out for you, and the vjp gets it",
        "ko": "식에 out이 들어갈 자리에 x를 썼습니다: {rule}. 순전파가 out을 남겨 두었고, vjp가 그것을 받습니다"},
    "hint_needs_x": {
        "en": "you used out where the formula needs x: {rule}; out = {op}(x) is the output, not the input",
        "ko": "식에 x가 들어갈 자리에 out을 썼습니다: {rule}. out = {op}(x): 출력이지 입력이 아닙니다"},
    "hint_logits_for_p": {
        "en": "yours is built from the logits; the derivative of log Σ_j e^logits[i, j] is p = softmax(logits), "
              "which the vjp gets as p: use p where you used the logits",
        "ko": "내 값은 logits로 만들었습니다. log Σ_j e^logits[i, j]의 미분은 p = softmax(logits)이고, vjp는 "
              "이것을 p로 받습니다: logits를 쓴 자리에 p를 쓰세요"},
    "hint_softmax_axis": {
        "en": "the sum in your vjp runs {axis}; softmax normalises each row, along the last axis: sum with "
              "axis=-1, keepdims=True",
        "ko": "vjp 안의 합이 {axis} 갑니다. softmax는 각 행을, 즉 마지막 축을 따라 정규화합니다: axis=-1, keepdims=True로 더하세요"},
    "hint_layer_norm_axis": {
        "en": "the means in your dL/dx run {axis}; layer norm normalises each row, along the last axis: mean with "
              "axis=-1, keepdims=True",
        "ko": "dL/dx 안의 평균들이 {axis} 갑니다. layer norm은 각 행을, 즉 마지막 축을 따라 정규화합니다: axis=-1, keepdims=True로 평균을 내세요"},
    "hint_mean_other_axes": {
        "en": "you divided by {m}, x's size along axis {others}; this mean averages along axis {axes}: n = {n}",
        "ko": "나눈 수가 {m}인데, 이것은 {others}번 축을 따라 잰 x의 크기입니다. 이 mean은 {axes}번 축을 따라 "
              "평균을 냅니다: n = {n}"},
    "hint_mean_missing_n": {
        "en": "yours is {n} times the right one: mean divides each sum by n = {n}, the number of elements "
              "averaged, and so does its gradient: the missing 1/n",
        "ko": "내 값이 맞는 값의 {n}배입니다: mean은 각 합을 평균 낸 원소의 수 n(여기서는 {n})으로 나누고, "
              "기울기도 마찬가지입니다: 1/n이 빠졌습니다"},
    "hint_matmul_shapes": {
        "en": "line up the shapes: g is (n, m), a (n, k), b (k, m), and dL/da must be (n, k), dL/db (k, m): each "
              "is g times the other input, or its transpose, in the one order whose shapes fit",
        "ko": "shape를 맞춰 보세요: g는 (n, m), a는 (n, k), b는 (k, m)이고, dL/da는 (n, k), dL/db는 (k, m)이어야 합니다. 각각은 g와 다른 "
              "입력(또는 그 전치)의 곱이며, shape가 맞는 순서는 하나뿐입니다"},
    "hint_softmax_diagonal": {
        "en": "you have g·s·(1 - s): the Jacobian's diagonal alone (ds_j/dx_j = s_j(1 - s_j)). Its entries off the "
              "diagonal, ds_i/dx_j = -s_i·s_j for i ≠ j, count too: each g_i reaches x_j through them. dL/dx_j = "
              "s_j·(g_j - Σ_i g_i·s_i)",
        "ko": "내 값은 g·s·(1 - s), 즉 야코비안의 대각선뿐입니다 (ds_j/dx_j = s_j(1 - s_j)). 대각선 밖의 원소 ds_i/dx_j = -s_i·s_j (i ≠ "
              "j)도 셈에 들어갑니다: 각 g_i는 그것을 통해 x_j에 닿습니다. dL/dx_j = s_j·(g_j - Σ_i g_i·s_i)"},
    "hint_one_hot": {
        "en": "the missing subtraction: at each row's target the loss has the term -logits[i, t_i], whose "
              "derivative is -1 there (and 0 elsewhere)",
        "ko": "빠뜨린 뺄셈: 각 행의 정답 위치에서 손실에는 -logits[i, t_i] 항이 있고, 그 미분은 그 자리에서 -1(다른 곳에서는 0)입니다"},
    "hint_mean_rows": {
        "en": "the loss is the mean over the {rows} rows: the missing 1/N",
        "ko": "손실은 {rows}개 행의 평균입니다: 1/N이 빠졌습니다"},
    "hint_layer_norm_constants": {
        "en": "you treated μ and σ as constants (yours is ĝ/σ): they depend on every x of the row, two more paths "
              "to the loss",
        "ko": "μ와 σ를 상수로 다뤘습니다(내 값은 ĝ/σ): 둘 다 행의 모든 x에 달려 있어서, 손실로 가는 길이 두 개 더 있습니다"},
    "hint_embedding_repeats": {
        "en": "ids repeat ({repeats}): yours keeps one row of g for a repeated id, as `grad[ids] += g` or "
              "`grad[ids] = g` does (numpy writes each place once); each use of a row adds its gradient: "
              "np.add.at(grad, ids, g) adds them all",
        "ko": "ids에 같은 id가 여러 번 나옵니다({repeats}): 내 값은 반복된 id에 g의 행을 하나만 남깁니다. `grad[ids] += g`나 `grad[ids] = g`가 "
              "그렇게 합니다(numpy는 각 자리에 한 번만 씁니다). 행이 쓰일 때마다 기울기가 더해집니다: np.add.at(grad, ids, g)는 모두 더합니다"},
    "id_times": {"en": "id {id} {times} times", "ko": "id {id}: {times}번"},
    "hint_embedding_rows": {
        "en": "that is g's shape: one row per id ({ids} of them); dL/dtable has one row per row of the table "
              "({rows}): start from zeros of the table's shape and add each row of g into its id's row",
        "ko": "그것은 g의 shape입니다: id마다 한 행씩({ids}개). dL/dtable은 표의 행마다 한 행씩({rows}개)입니다: "
              "표와 같은 shape의 0에서 시작해, g의 각 행을 그 id의 행에 더하세요"},
    "hint_attention_shapes": {
        "en": "line up the shapes (T = {T}, d = {d}): g, q, k and v are (T, d), the weights (T, T); each product "
              "of steps 4 and 1 is g or dL/dscores times an input, or its transpose, in the one order whose shapes "
              "fit: dL/dweights (T, T), dL/dv, dL/dq and dL/dk (T, d) (exercise 05)",
        "ko": "shape를 맞춰 보세요 (T = {T}, d = {d}): g, q, k, v는 (T, d), 가중치는 (T, T)입니다. 4단계와 1단계의 "
              "곱은 각각 g나 dL/dscores와 입력(또는 그 전치)의 곱이고, shape가 맞는 순서는 하나뿐입니다: "
              "dL/dweights는 (T, T), dL/dv, dL/dq, dL/dk는 (T, d) (연습 05)"},
    "hint_attention_mask_forgotten": {
        "en": "attention, step 2 (mask): your weights have no mask: recomputed from q and k without it, they give "
              "weight to later positions (j > i). Use the forward's weights (the vjp gets them), or put -inf where "
              "j > i before the softmax",
        "ko": "attention 2단계(마스크): 가중치에 마스크가 없습니다. 마스크 없이 q와 k로 다시 계산하면 뒤쪽 위치(j "
              "> i)에도 가중치가 갑니다. 순전파의 가중치(vjp가 받습니다)를 쓰거나, softmax 전에 j > i인 곳에 "
              "-inf를 넣으세요"},
    "hint_attention_mask_inf": {
        "en": "attention, step 2 (mask): dL/d{name} has inf or nan: a masked score does not reach the loss, so its "
              "gradient is 0, not -inf (its weight is 0, and so is what step 3 gives there)",
        "ko": "attention 2단계(마스크): dL/d{name}에 inf나 nan이 있습니다. 마스크된 점수는 손실에 닿지 않으므로 그 "
              "기울기는 -inf가 아니라 0입니다 (그 자리의 가중치가 0이고, 3단계가 주는 값도 0입니다)"},
    "hint_attention_dv": {
        "en": "attention, step 4 (weighted sum, out = weights @ v): dL/dv = weightsᵀ @ g: your product is missing "
              "the transpose (weights @ g)",
        "ko": "attention 4단계(가중합, out = weights @ v): dL/dv = weightsᵀ @ g입니다. 내 곱에는 전치가 빠졌습니다 "
              "(weights @ g)"},
    "hint_attention_softmax_diagonal": {
        "en": "attention, step 3 (softmax): you have weights·(1 - weights)·dL/dweights, the Jacobian's diagonal "
              "alone; its entries off the diagonal, -w_i·w_j, count too: weights·(dL/dweights - Σ_j "
              "weights·dL/dweights) (exercise 06)",
        "ko": "attention 3단계(softmax): 내 값은 weights·(1 - weights)·dL/dweights, 즉 야코비안의 대각선뿐입니다. 대각선 밖의 원소 "
              "-w_i·w_j도 셈에 들어갑니다: weights·(dL/dweights - Σ_j weights·dL/dweights) (연습 06)"},
    "hint_attention_softmax_axis": {
        "en": "attention, step 3 (softmax): your sum runs along axis 0, down the columns; the weights are "
              "normalised along each row: sum with axis=-1, keepdims=True",
        "ko": "attention 3단계(softmax): 합이 축 0을 따라, 즉 열 방향으로 갑니다. 가중치는 행마다 정규화되어 "
              "있습니다: axis=-1, keepdims=True로 더하세요"},
    "hint_attention_scale": {
        "en": "attention, step 1 (scores = q @ kᵀ / √d): the 1/√d of the scores: dL/dq and dL/dk carry it once (√d "
              "= {root_d:.4g})",
        "ko": "attention 1단계(scores = q @ kᵀ / √d): 점수의 1/√d: dL/dq와 dL/dk에는 이것이 한 번 곱해집니다 (√d = "
              "{root_d:.4g})"},
    "hint_attention_dq": {
        "en": "attention, step 1 (scores = q @ kᵀ / √d): dL/dq = dL/dscores @ k / √d, with no transpose: yours has "
              "one (dL/dscoresᵀ @ k)",
        "ko": "attention 1단계(scores = q @ kᵀ / √d): dL/dq = dL/dscores @ k / √d이고 전치가 없습니다. 내 식에는 "
              "전치가 있습니다 (dL/dscoresᵀ @ k)"},
    "hint_attention_dk": {
        "en": "attention, step 1 (scores = q @ kᵀ / √d): dL/dk = dL/dscoresᵀ @ q / √d: your product is missing the "
              "transpose (dL/dscores @ q)",
        "ko": "attention 1단계(scores = q @ kᵀ / √d): dL/dk = dL/dscoresᵀ @ q / √d입니다. 내 곱에는 전치가 "
              "빠졌습니다 (dL/dscores @ q)"},
    "hint_sign": {"en": "the sign is flipped", "ko": "부호가 뒤집혔습니다"},
    "hint_ratio": {
        "en": "yours is {ratio:.6g} times the right one, everywhere",
        "ko": "내 값이 모든 곳에서 맞는 값의 {ratio:.6g}배입니다"},

    "checker_failed": {
        "en": "{what}: check.py itself failed while grading it ({error}): that is a bug in check.py, not in your "
              "code; please report it",
        "ko": "{what}: 채점하던 check.py 자신이 실패했습니다 ({error}): 내 코드가 아니라 check.py의 버그입니다. 알려 주세요"},
    "vjp_wrote_into": {
        "en": "{op}: your vjp wrote into {name}, {what}",
        "ko": "{op}: vjp가 {name}에 값을 써 넣었습니다. {name}: {what}"},
    "what_g": {"en": "the upstream gradient it is handed", "ko": "vjp가 받은 위쪽 기울기"},
    "what_saved": {"en": "which the forward saved for backward", "ko": "순전파가 역전파를 위해 남겨 둔 배열"},
    "what_none": {"en": "None", "ko": "None (값 없음)"},
    "hint_rule_failed": {
        "en": "(check.py's hint rule {rule} failed here with {error}: that is a bug in check.py, not in your code, "
              "and the verdict above stands; please report it)",
        "ko": "(check.py의 힌트 규칙({rule})이 여기서 실패했습니다: {error}. 내 코드가 아니라 check.py의 버그이고, 위의 판정은 그대로입니다. 알려 주세요)"},
    "hint_wrote_into_saved": {
        "en": "a vjp must not write into what the forward saved ({name}): those arrays are the forward's (its "
              "output, its inputs, what it computed for backward); other ops read them, and a second backward "
              "(retain_graph=True) would run on the changed ones. Compute a new array instead (`{first} * ...`), "
              "or write into a copy (`{first}.copy()`)",
        "ko": "vjp는 순전파가 남겨 둔 배열({name})에 값을 써 넣으면 안 됩니다. 그 배열들은 순전파의 것입니다(출력, 입력, 역전파를 위해 계산해 둔 값). 다른 연산들이 읽고, 두 "
              "번째 역전파(retain_graph=True)는 바뀐 값으로 돌게 됩니다. 새 배열을 만들거나(`{first} * ...`), 복사본(`{first}.copy()`)에 쓰세요"},
    "hint_returned_none": {
        "en": "a function without `return` gives None, and so does `return` of a call that works in place "
              "(np.add.at(...), a.fill(...), a.sort()): return the array itself",
        "ko": "`return`이 없는 함수는 None을 돌려주고, 제자리에서 일하는 호출(np.add.at(...), a.fill(...), a.sort())을 return해도 None이 "
              "나옵니다: 배열 자체를 돌려주세요"},
    "hint_returned_tuple": {
        "en": "yours is the right gradient in a tuple (or list) of one: this vjp returns the array dL/d{name} "
              "itself (a trailing comma, `return g * out,`, makes a tuple)",
        "ko": "내 값은 맞는 기울기를 원소 하나짜리 tuple(또는 list)에 담은 것입니다. 이 vjp는 배열 dL/d{name} 자체를 돌려줍니다 (끝의 쉼표, `return g * "
              "out,`가 tuple을 만듭니다)"},
    "hint_returned_number": {
        "en": "yours is one number (a {kind}), where dL/d{name} has {name}'s shape {shape}: one number for each "
              "element of {name}",
        "ko": "내 값은 숫자 하나({kind})입니다. dL/d{name}은 {name}의 shape {shape}를 가집니다: {name}의 원소마다 숫자 하나씩"},
    "hint_integer_values": {
        "en": "your gradient's dtype is {dtype}: integers cannot hold the gradient's fractions (numpy cuts them "
              "off when it stores them): fill an array of floats (np.zeros_like of a float array, or "
              "np.zeros(shape))",
        "ko": "내 기울기의 dtype이 {dtype}입니다: 정수는 기울기의 소수 부분을 담지 못합니다(numpy는 저장할 때 잘라 버립니다). 실수 배열을 채우세요 (실수 배열의 "
              "np.zeros_like, 또는 np.zeros(shape))"},
    "hint_cast_into_integers": {
        "en": "numpy would not put {what} values into an array of {into}: an integer array cannot hold the "
              "gradient's fractions. Make the array you add into a float one (np.zeros_like of a float array, or "
              "np.zeros(shape); np.zeros_like(ids) or dtype=int gives integers)",
        "ko": "numpy가 {what} 값을 {into} 배열에 넣지 않았습니다: 정수 배열은 기울기의 소수 부분을 담지 못합니다. 더해 넣을 배열을 실수 배열로 만드세요 (실수 배열의 "
              "np.zeros_like, 또는 np.zeros(shape). np.zeros_like(ids)나 dtype=int는 정수 배열을 만듭니다)"},
    "hint_axis_as_index": {
        "en": "axis arrives as a tuple of ints, {axis}: x.shape[axis] needs one int. The number of elements "
              "averaged is the product of x's sizes along all of them: n = np.prod([x.shape[a] for a in axis])",
        "ko": "axis는 정수의 tuple {axis}로 들어옵니다: x.shape[axis]에는 정수 하나가 필요합니다. 평균 낸 원소의 수는 그 모든 축을 따라 잰 x의 크기를 곱한 "
              "것입니다: n = np.prod([x.shape[a] for a in axis])"},
    "hint_targets_as_rows": {
        "en": "index {index} is past axis 0's {rows} rows, and {index} is one of the targets: a target is a column "
              "(0 to C - 1 = {columns} - 1), one for each row. grad[targets] picks whole rows; grad[np.arange(N), "
              "targets] picks row i's target column",
        "ko": "인덱스 {index}는 축 0의 행 {rows}개를 넘어서고, {index}는 정답(targets) 중 하나입니다: 정답은 행마다 하나인 열 번호입니다(0부터 C - 1 = "
              "{columns} - 1까지). grad[targets]는 행 전체를 고르고, grad[np.arange(N), targets]는 i번째 행의 정답 열을 고릅니다"},
    "hint_lost_keepdims_silent": {
        "en": "a sum or mean in your vjp dropped its axis (keepdims is False by default), and numpy lined what was "
              "left up with another axis, without an error: keep it, with keepdims=True (run so, your vjp gives "
              "the right gradient)",
        "ko": "vjp 안의 sum이나 mean이 축을 없앴고(keepdims의 기본값은 False), numpy는 남은 것을 오류 없이 다른 축에 맞췄습니다: keepdims=True로 축을 "
              "남겨 두세요 (그렇게 돌리면 vjp가 맞는 기울기를 냅니다)"},
    "hint_product_fits": {
        "en": "a matrix product's shapes do not fit: {products}; made so, your vjp gives the right gradients (each "
              "is g, or a gradient on the way, times an input or its transpose, in the one order whose shapes fit)",
        "ko": "행렬곱의 shape가 맞지 않습니다: {products}. 그렇게 바꾸면 vjp가 맞는 기울기를 냅니다 (각 기울기는 g, 또는 중간 기울기와 입력(또는 그 전치)의 곱이고, "
              "shape가 맞는 순서는 하나뿐입니다)"},
    "product_fixed": {"en": "{written} does not fit, {fixed} does", "ko": "{written}는 맞지 않고, {fixed}는 맞습니다"},
    "an_array": {"en": "an array {shape}", "ko": "배열 {shape}"},
    "hint_other_input": {
        "en": "yours for {name} is dL/d{other}, the gradient of {other}: each input has its own (the chain rule "
              "takes d(out)/d{name} for {name})",
        "ko": "{name}에 대한 내 값은 dL/d{other}, 즉 {other}의 기울기입니다: 입력마다 제 기울기가 있습니다 ({name}에는 연쇄 법칙이 d(out)/d{name}을 "
              "씁니다)"},
    "hint_reshaped": {
        "en": "yours has the right numbers in the wrong places: the right gradient transposed, then reshaped into "
              "{name}'s shape. A reshape keeps the numbers in their order; a transpose moves them: transpose "
              "instead",
        "ko": "내 값에는 맞는 숫자들이 엉뚱한 자리에 있습니다: 맞는 기울기를 전치한 다음 {name}의 shape로 reshape한 것입니다. reshape는 숫자의 순서를 그대로 두고, "
              "전치는 자리를 옮깁니다: reshape 대신 전치하세요"},
    "hint_averaged": {
        "en": "yours is 1/{copies} of the right one: a mean over the {copies} copies the broadcast made of each "
              "element of {name}; the chain rule adds their gradients (a sum, not a mean)",
        "ko": "내 값은 맞는 값의 1/{copies}입니다: 브로드캐스트가 {name}의 원소마다 만든 복사본 {copies}개에 대한 평균을 냈습니다. 연쇄 법칙은 그 기울기들을 더합니다 "
              "(평균이 아니라 합)"},
    "hint_sum_drop_front": {
        "en": "your numbers are right (summed over axis {axes}), but you kept axis {front} with size 1: the "
              "broadcast put it in front of {name} {want}, so it goes; sum it away without keepdims (or reshape to "
              "{want})",
        "ko": "숫자는 맞습니다({axes}번 축을 따라 더함). 그런데 {front}번 축을 크기 1로 남겼습니다: 브로드캐스트가 {name} {want} 앞에 붙인 축이므로 없애야 합니다. "
              "keepdims 없이 더해서 없애세요 (또는 {want}로 reshape)"},
    "hint_sum_keep_ones": {
        "en": "your numbers are right (summed over axis {axes}), but {name} is {want}: keep the axes where {name} "
              "has size 1 (keepdims=True), and sum away those the broadcast put in front",
        "ko": "숫자는 맞습니다({axes}번 축을 따라 더함). 그런데 {name}의 shape는 {want}입니다: {name}의 크기가 1인 축은 남기고(keepdims=True), "
              "브로드캐스트가 앞에 붙인 축은 더해서 없애세요"},
    "hint_function_itself": {
        "en": "yours is g times {op}(x) itself, the function, where the chain rule wants its derivative: {rule}",
        "ko": "내 값은 g에 {op}(x) 자체, 즉 함수를 곱한 것입니다. 연쇄 법칙에는 그 미분이 필요합니다: {rule}"},
    "hint_multiplied_for_divided": {
        "en": "yours is g·x: d(ln x)/dx = 1/x, so the gradient divides by x: g / x",
        "ko": "내 값은 g·x입니다: d(ln x)/dx = 1/x이므로 기울기는 x로 나눕니다: g / x"},
    "axis_number": {"en": "along axis {axis}", "ko": "{axis}번 축을 따라"},
    "whole_array": {"en": "over the whole array (no axis)", "ko": "배열 전체에 대해(축 없이)"},
    "hint_mean_times_n": {
        "en": "yours is n·n times the right one (n = {n}): you multiplied by n where the mean divides by it",
        "ko": "내 값이 맞는 값의 n·n배입니다(n = {n}): mean이 n으로 나누는 자리에서 n을 곱했습니다"},
    "hint_softmax_subtraction": {
        "en": "you have s·g: the δ_ij part of the Jacobian ds_i/dx_j = s_i(δ_ij - s_j) alone. Its -s_i·s_j part "
              "(each s_i also moves when any x_j of its row does, through the sum below the fraction) gives "
              "-s_j·Σ_i g_i·s_i: softmax's missing subtraction: s·(g - Σ_i g_i·s_i), the sum along each row",
        "ko": "내 값은 s·g, 즉 야코비안 ds_i/dx_j = s_i(δ_ij - s_j)에서 δ_ij 부분뿐입니다. -s_i·s_j 부분(s_i는 같은 행의 어느 x_j가 움직여도 분모의 "
              "합을 통해 함께 움직입니다)이 -s_j·Σ_i g_i·s_i를 줍니다. softmax에서 빠뜨린 뺄셈입니다: s·(g - Σ_i g_i·s_i), 합은 행마다"},
    "hint_softmax_row_sum_s": {
        "en": "the sum you subtract is Σ_i g_i; it must be Σ_i g_i·s_i (each g_i weighted by its s_i): s goes "
              "inside the sum",
        "ko": "빼는 합이 Σ_i g_i입니다. Σ_i g_i·s_i(각 g_i에 그 s_i를 곱한 것)여야 합니다: s가 합 안에 들어갑니다"},
    "hint_softmax_mean": {
        "en": "you subtract each row's mean of g·s; it is its sum, Σ_i g_i·s_i, with no division by the row's "
              "length",
        "ko": "각 행의 g·s 평균을 뺐습니다. 빼야 할 것은 합 Σ_i g_i·s_i이고, 행의 길이로 나누지 않습니다"},
    "hint_softmax_plus": {
        "en": "you added each row's Σ_i g_i·s_i; it is subtracted: ds_i/dx_j = s_i(δ_ij - s_j), and the minus is "
              "the -s_j",
        "ko": "각 행의 Σ_i g_i·s_i를 더했습니다. 빼야 합니다: ds_i/dx_j = s_i(δ_ij - s_j)이고, 빼기는 -s_j에서 옵니다"},
    "hint_one_hot_and_mean": {
        "en": "the missing subtraction: at each row's target the loss has the term -logits[i, t_i], whose "
              "derivative is -1 there; and the loss is the mean over the {rows} rows: the missing 1/N too",
        "ko": "빠뜨린 뺄셈: 각 행의 정답 위치에서 손실에는 -logits[i, t_i] 항이 있고, 그 미분은 그 자리에서 -1입니다. 그리고 손실은 {rows}개 행의 평균입니다: 1/N도 "
              "빠졌습니다"},
    "hint_mean_all": {
        "en": "you divided by {size}, the number of logits (N·C); the loss is the mean over the {rows} rows, one "
              "term each: divide by N = {rows}",
        "ko": "{size}, 즉 logits의 개수(N·C)로 나눴습니다. 손실은 {rows}개 행(행마다 항 하나)의 평균입니다: N = {rows}로 나누세요"},
    "hint_one_hot_columns": {
        "en": "you subtracted 1 in every row at every target's column (grad[:, targets] -= 1); row i has one "
              "target, t_i: grad[np.arange(N), targets] -= 1 picks one element in each row",
        "ko": "모든 행에서 모든 정답의 열에 1을 뺐습니다 (grad[:, targets] -= 1). i번째 행의 정답은 t_i 하나입니다: grad[np.arange(N), targets] "
              "-= 1은 행마다 원소 하나를 고릅니다"},
    "hint_layer_norm_mu_path": {
        "en": "the path through μ is missing: μ moves with every x of the row (dμ/dx_i = 1/C), which gives "
              "-mean(ĝ) over the row: subtract ĝ's row mean",
        "ko": "μ를 거치는 길이 빠졌습니다: μ는 행의 모든 x와 함께 움직이고(dμ/dx_i = 1/C), 그 길이 행에 대한 -mean(ĝ)를 줍니다: ĝ의 행 평균을 빼세요"},
    "hint_layer_norm_sigma_path": {
        "en": "the path through σ is missing: σ moves with every x of the row (dσ/dx_i = x̂_i/C), which gives "
              "-x̂·mean(ĝ·x̂) over the row",
        "ko": "σ를 거치는 길이 빠졌습니다: σ는 행의 모든 x와 함께 움직이고(dσ/dx_i = x̂_i/C), 그 길이 행에 대한 -x̂·mean(ĝ·x̂)를 줍니다"},
    "hint_layer_norm_mu_sign": {
        "en": "the sign of the μ term: the path through μ gives -mean(ĝ) (x̂ = (x - μ)/σ falls as μ rises)",
        "ko": "μ 항의 부호: μ를 거치는 길은 -mean(ĝ)를 줍니다 (μ가 커지면 x̂ = (x - μ)/σ는 작아집니다)"},
    "hint_layer_norm_sigma_sign": {
        "en": "the sign of the σ term: the path through σ gives -x̂·mean(ĝ·x̂) (x̂ shrinks as σ grows)",
        "ko": "σ 항의 부호: σ를 거치는 길은 -x̂·mean(ĝ·x̂)를 줍니다 (σ가 커지면 x̂는 줄어듭니다)"},
    "hint_layer_norm_sums": {
        "en": "a sum over the row where the formula has a mean: dμ/dx_i = 1/C and dσ/dx_i = x̂_i/C each bring a "
              "1/C (C = {columns})",
        "ko": "식에 평균이 들어갈 자리에 행에 대한 합을 썼습니다: dμ/dx_i = 1/C와 dσ/dx_i = x̂_i/C는 각각 1/C를 가져옵니다 (C = {columns})"},
    "hint_layer_norm_w": {
        "en": "w is missing: the gradient reaching x̂ is ĝ = g·w (y = x̂·w + b), and every term of dL/dx is built "
              "from ĝ",
        "ko": "w가 빠졌습니다: x̂에 닿는 기울기는 ĝ = g·w이고(y = x̂·w + b), dL/dx의 모든 항은 ĝ로 만듭니다"},
    "hint_layer_norm_sigma": {
        "en": "yours is not divided by σ: x̂ = (x - μ)/σ, so every path from x to the loss passes the 1/σ",
        "ko": "내 값은 σ로 나누지 않았습니다: x̂ = (x - μ)/σ이므로, x에서 손실로 가는 모든 길이 1/σ를 지납니다"},
    "hint_attention_softmax_subtraction": {
        "en": "attention, step 3 (softmax): you have weights·dL/dweights, the δ part of softmax's Jacobian alone: "
              "subtract each row's Σ_j weights·dL/dweights first (exercise 06)",
        "ko": "attention 3단계(softmax): 내 값은 weights·dL/dweights, 즉 softmax 야코비안의 δ 부분뿐입니다: 먼저 각 행의 Σ_j "
              "weights·dL/dweights를 빼세요 (연습 06)"},
    "preparing_text": {
        "en": "loss_falls: preparing the text and the model (the time limit counts from step 1)",
        "ko": "loss_falls: 텍스트와 모델 준비 중 (시간 제한은 1단계부터 셉니다)"},
    "vjp_wrote_read_only": {
        "en": "{op}: your vjp wrote into a read-only array (numpy refused: {error})",
        "ko": "{op}: vjp가 읽기 전용 배열에 값을 써 넣었습니다 (numpy가 거부했습니다: {error})"},
    "hint_wrote_read_only": {
        "en": "g comes read-only, and so do views of it (g.T, g[...], np.broadcast_to(g, shape)): a vjp must not "
              "write into them (g may be shared); compute a new array (`np.broadcast_to(g, shape) * 2`), or write "
              "into a copy (`.copy()`)",
        "ko": "g는 읽기 전용으로 오고, 그 뷰(g.T, g[...], np.broadcast_to(g, shape))도 그렇습니다: vjp는 거기에 값을 써 넣으면 안 됩니다(g는 공유될 수 "
              "있습니다). 새 배열을 만들거나(`np.broadcast_to(g, shape) * 2`), 복사본(`.copy()`)에 쓰세요"},
    # ---- exercise 10's check of the whole
    "training_step": {"en": "loss_falls: step {step} of {steps}", "ko": "loss_falls: {steps}단계 중 {step}단계"},
    "loss_did_not_fall": {
        "en": "in {steps} steps the loss went from {first:.3f} only to {last:.3f} (the mean of the last 10 steps); "
              "with right gradients it falls by more than 1",
        "ko": "{steps}단계 동안 손실이 {first:.3f}에서 {last:.3f}(마지막 10단계의 평균)까지밖에 내려가지 "
              "않았습니다. 기울기가 맞으면 1보다 많이 내려갑니다"},
}
