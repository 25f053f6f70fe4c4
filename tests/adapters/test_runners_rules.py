"""The runner shims' rules, one at a time in this process (adapters/*/runner.py, adapters/lingbot_v2/fov_runner.py
and the helpers of adapters/shim.py they lean on). A shim runs inside a model's own environment: here upstream's
modules are small stand-ins (in ``sys.modules`` or written into a checkout folder under tmp_path), each replacement
is called the way upstream's call site calls it, and each runner is also run as ``python runner.py ... -- script``
would run it, with a stand-in upstream script. The contract-level checks of the same shims (their call sites as the
contracts record them): tests/adapters/test_contracts.py; the helpers alone: tests/adapters/test_shim_rules.py."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import random
import sys
import types

import numpy as np
import pytest
import yaml

from adapters import shim
from adapters.dreamx import runner as dreamx
from adapters.hy_worldplay import runner as hy
from adapters.lingbot_v2 import fov_runner as fov
from adapters.matrix_game3 import runner as mg3
from adapters.matrix_game35 import runner as mg35
from adapters.yume import runner as yume
from tests.support import ROOT

#: top-level names of upstream packages the stand-ins use (a real package of that name would shadow them)
UPSTREAM_ROOTS = ("utils", "wan", "pipeline", "hyvideo")


@pytest.fixture
def checkout(monkeypatch, tmp_path, restore_env):
    """tmp_path is the upstream checkout and the current directory, first on ``sys.path``; sys.argv, sys.path,
    PYTHONHASHSEED (the seeding sets it) and ``sys.modules`` (what the test imported or stood in) come back."""
    restore_env("PYTHONHASHSEED")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    for name in [n for n in sys.modules if n.split(".")[0] in UPSTREAM_ROOTS]:
        monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def standin(monkeypatch, name: str, **attrs) -> types.ModuleType:
    """An upstream module ``name`` holding ``attrs`` (functions get it as their ``__module__``)."""
    mod = types.ModuleType(name)
    for key, value in attrs.items():
        if isinstance(value, types.FunctionType) and value.__module__ == __name__:  # made here: upstream's now
            value.__module__ = name
        setattr(mod, key, value)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def run_as_script(module: str, *argv: str) -> None:
    """``python <the runner's file> ARGV``: the module's code, as the import system serves it, run as ``__main__``."""
    spec = importlib.util.find_spec(module)

    class Main(types.ModuleType):
        __name__ = property(lambda self: module)  # the name the loader checks; the code sees "__main__"

    main = Main("__main__")
    main.__file__ = spec.origin
    sys.argv = [spec.origin, *argv]
    spec.loader.exec_module(main)


def test_run_as_script_runs_the_code_under_the_name_main(checkout):
    write(checkout, {"probe_mod_for_runners.py": "import json\njson.dump(__name__, open('name.json', 'w'))\n"})
    run_as_script("probe_mod_for_runners")
    assert json.loads((checkout / "name.json").read_text()) == "__main__"


# -- every runner's command line -----------------------------------------------------------------------------------

PARSERS = {
    "yume": (yume.build_parser, ["--seed", "1", "--captions", "c.txt"],
             {"generate": "wan23.Yume.generate", "checkpoint": None, "captioner": None, "verbatim_prompt": None,
              "commit": "111c3fab7fb020d1e261a68be6ec78a3fecc8d5b"}),
    "dreamx": (dreamx.build_parser, ["--seed", "1", "--cameras", "cameras.txt"], {"full_kv": 0}),
    "matrix_game3": (mg3.build_parser, ["--seed", "1", "--keyboard", "k.npy", "--mouse", "m.npy", "--fps", "17"], {}),
    "matrix_game35": (mg35.build_parser, ["--seed", "1", "--config-in", "a.yaml", "--config-out", "b.yaml"],
                      {"num_blocks": None}),
    "hy_worldplay": (hy.build_parser, ["--seed", "1"], {"selection": None}),
    "lingbot_v2": (fov.build_parser, ["--selection", "s.json", "--frame-seqlen", "1508"],
                   {"kernels": "wan.modules.model_fast:flash_attention,wan.distributed.sequence_parallel:flash_attention",
                    "seed": None}),
}
REQUIRED = [(model, flag) for model, (_, argv, _) in PARSERS.items() for flag in argv[::2]]


@pytest.mark.parametrize("model", PARSERS)
def test_a_runners_options_parse_to_their_types_and_defaults(model):
    build, argv, defaults = PARSERS[model]
    typed = {"--seed": 1, "--frame-seqlen": 1508, "--fps": 17.0}
    given = {flag.lstrip("-").replace("-", "_"): typed.get(flag, value) for flag, value in zip(argv[::2], argv[1::2])}
    got = vars(build().parse_args(argv))
    assert got == {**given, **defaults}
    assert {k: type(got[k]) for k in given} == {k: type(v) for k, v in given.items()}  # 17.0, not 17


@pytest.mark.parametrize("model,flag", REQUIRED)
def test_each_required_option_of_a_runner_cannot_be_left_out(model, flag):
    build, argv, _ = PARSERS[model]
    i = argv.index(flag)
    with pytest.raises(SystemExit):
        build().parse_args(argv[:i] + argv[i + 2:])


@pytest.mark.parametrize("model", PARSERS)
def test_a_runner_refuses_an_abbreviated_option(model):
    build, argv, _ = PARSERS[model]
    short = argv[0][:-1]  # --seed -> --see, --selection -> --selectio: a unique prefix
    with pytest.raises(SystemExit):
        build().parse_args([short, *argv[1:]])


def test_the_optional_options_take_their_values():
    assert vars(yume.build_parser().parse_args(["--seed", "2", "--captions", "c", "--generate", "m.C.f", "--checkpoint",
                                                "w", "--verbatim-prompt", "p", "--commit", "abc"])) == \
        {"seed": 2, "captions": "c", "generate": "m.C.f", "checkpoint": "w", "captioner": None,
         "verbatim_prompt": "p", "commit": "abc"}
    assert yume.build_parser().parse_args(["--seed", "2", "--captions", "c", "--captioner", "x"]).captioner == "x"
    assert dreamx.build_parser().parse_args(["--seed", "2", "--cameras", "c", "--full-kv", "126"]).full_kv == 126
    assert mg35.build_parser().parse_args(["--seed", "2", "--config-in", "a", "--config-out", "b", "--num-blocks",
                                           "9"]).num_blocks == 9
    assert hy.build_parser().parse_args(["--seed", "2", "--selection", "s.json"]).selection == "s.json"
    opts = fov.build_parser().parse_args(["--selection", "s", "--frame-seqlen", "4", "--kernels", "m:f", "--seed", "3"])
    assert (opts.kernels, opts.seed) == ("m:f", 3)


# -- adapters/shim.py: what the runners lean on ----------------------------------------------------------------------


def test_a_seed_above_2_to_the_32_reaches_numpy_modulo_2_to_the_32_and_a_small_one_unchanged(monkeypatch, restore_env):
    restore_env("PYTHONHASHSEED")
    monkeypatch.setitem(sys.modules, "torch", None)  # an environment without torch: python and numpy still seeded
    shim.seed_everything(100)
    assert (random.random(), np.random.rand()) == (random.Random(100).random(), np.random.RandomState(100).rand())
    shim.seed_everything(2**32 + 100)
    assert np.random.rand() == np.random.RandomState(100).rand()


@pytest.mark.parametrize("cuda", [False, True])
def test_torch_is_seeded_and_cuda_only_where_it_is_available(monkeypatch, restore_env, cuda):
    restore_env("PYTHONHASHSEED")
    calls = []
    fake = types.ModuleType("torch")
    fake.manual_seed = lambda s: calls.append(("manual_seed", s))
    fake.cuda = types.SimpleNamespace(is_available=lambda: cuda,
                                      manual_seed_all=lambda s: calls.append(("cuda.manual_seed_all", s)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    shim.seed_everything(7)
    assert calls == [("manual_seed", 7)] + ([("cuda.manual_seed_all", 7)] if cuda else [])


def test_main_with_reads_sys_argv_after_the_program_name(checkout):
    write(checkout, {"gen.py": "import json, sys\njson.dump(sys.argv, open('argv.json', 'w'))\n"})
    parser = argparse.ArgumentParser()
    parser.add_argument("--x")
    seen = []
    sys.argv = ["runner.py", "--x", "1", "--", "gen.py", "--y"]
    shim.main_with(parser, lambda opts: seen.append(opts.x))
    assert seen == ["1"] and json.loads((checkout / "argv.json").read_text()) == ["gen.py", "--y"]


def test_main_with_puts_the_checkout_first_on_the_path_before_the_patch_imports(checkout, monkeypatch):
    write(checkout / "sub", {"cwd_mod_for_runners.py": "VALUE = 4\n", "gen.py": "pass\n"})
    monkeypatch.chdir(checkout / "sub")  # a checkout that is not on the path yet
    parser = argparse.ArgumentParser()  # no --seed: nothing is seeded
    seen = []

    def patch(opts):
        import cwd_mod_for_runners

        seen.append((sys.path[0], cwd_mod_for_runners.VALUE))

    shim.main_with(parser, patch, ["--", "gen.py"])
    assert seen == [(str(checkout / "sub"), 4)]


def test_a_missing_literal_names_an_empty_commit_when_the_runner_has_none(checkout):
    write(checkout, {"gen.py": "N = 1\n"})
    parser = argparse.ArgumentParser()
    parser.add_argument("--commit")  # default None
    with pytest.raises(SystemExit, match=r"'N = 2' not found in gen.py; this patch targets upstream $"):
        shim.main_with(parser, lambda opts: [("N = 2", "N = 3")], ["--", "gen.py"])
    with pytest.raises(SystemExit, match=r"targets upstream abc$"):
        shim.main_with(parser, lambda opts: [("N = 2", "N = 3")], ["--commit", "abc", "--", "gen.py"])


def test_patch_attr_leaves_a_module_that_never_imported_the_name_alone(checkout, monkeypatch):
    up = standin(monkeypatch, "up_for_runners", f=lambda: 1)
    user = standin(monkeypatch, "user_for_runners", f=up.f)
    other = standin(monkeypatch, "other_for_runners", g=lambda: 2)
    shim.patch_attr("up_for_runners", "f", lambda original: shim.marked(lambda: original() + 1))
    assert (up.f(), user.f()) == (2, 2) and not hasattr(other, "f")


def test_patch_attr_sets_the_replacement_on_a_module_whose_attribute_is_made_on_each_access(monkeypatch):
    def module_getattr(name):  # PEP 562: ``f`` is a new object on every access
        if name != "f":
            raise AttributeError(name)
        return lambda: "fresh"

    lazy = standin(monkeypatch, "lazy_for_runners", __getattr__=module_getattr)
    shim.patch_attr("lazy_for_runners", "f", lambda original: shim.marked(lambda: original() + " wrapped"))
    assert lazy.f() == "fresh wrapped" and lazy.f.harness_shim is True


def test_patch_attr_skips_a_blocked_import_even_for_an_attribute_that_is_none(monkeypatch):
    mod = types.ModuleType("hook_for_runners")
    mod.HOOK = None
    monkeypatch.setattr(sys, "modules", {"hook_for_runners": mod, "blocked_for_runners": None})
    shim.patch_attr("hook_for_runners", "HOOK", lambda original: "new")
    monkeypatch.undo()
    assert mod.HOOK == "new"


def test_patch_source_refuses_a_namespace_package_that_has_no_source_file(checkout):
    (checkout / "nsfolder_for_runners").mkdir()
    with pytest.raises(SystemExit, match="cannot find module 'nsfolder_for_runners' in the upstream checkout"):
        shim.patch_source("nsfolder_for_runners", [], "abc")


# -- YUME ----------------------------------------------------------------------------------------------------------


def _recording_generate():
    seen = []

    def generate(self, input_prompt, img=None, seed=-1, **kwargs):
        seen.append((input_prompt, seed))
        return ("video", input_prompt)

    return generate, seen


def test_yume_call_k_gets_caption_line_k_and_seed_plus_k():
    original, seen = _recording_generate()
    gen = yume.make_generate(original, ["a. ", "b. ", "c. "], seed=10)
    assert gen(None, "anything at all", img=None) == ("video", "anything at all")  # stage 0: as upstream gave it
    gen(None, "a. RESPONSE 1")  # upstream prepares stage 1 with line 0 (+ the captioner's response)
    gen(None, "b. RESPONSE 2", img="x")
    assert seen == [("anything at all", 10), ("b. RESPONSE 1", 11), ("c. RESPONSE 2", 12)]
    assert gen.harness_shim is True and gen.__name__ == "generate"


def test_yume_a_seed_the_caller_passes_is_kept():
    original, seen = _recording_generate()
    gen = yume.make_generate(original, ["a.", "b."], seed="5")
    gen(None, "a.", seed=99)
    gen(None, "a.")
    assert seen == [("a.", 99), ("b.", 6)]


def test_yume_a_call_past_the_last_caption_line_stops_the_run():
    original, seen = _recording_generate()
    gen = yume.make_generate(original, ["a.", "b."], seed=0)
    gen(None, "a.")
    gen(None, "a.")
    with pytest.raises(SystemExit, match=r"^shim: Yume.generate called 3 times but the caption file has 2 lines$"):
        gen(None, "b.")
    assert len(seen) == 2


def test_yume_a_stage_caption_that_is_not_the_previous_line_stops_the_run():
    original, _ = _recording_generate()
    gen = yume.make_generate(original, ["a.", "b.", "c."], seed=0)
    gen(None, "a.")
    with pytest.raises(SystemExit, match=r"^shim: stage 1 caption does not start with line 0 of the caption file; "
                                         r"the call site differs from 111c3fab7fb0$"):
        gen(None, "b. response")


def test_yume_captions_are_lines_with_the_newline_stripped_and_blank_lines_kept(tmp_path):
    p = tmp_path / "caption.txt"
    p.write_bytes("a kettle. \n\nthé.\nlast".encode())
    assert yume.read_captions(str(p)) == ["a kettle. ", "", "thé.", "last"]


@pytest.fixture
def yume_pkg(checkout):
    write(checkout, {"ypkg_for_runners/__init__.py": "", "ypkg_for_runners/wan.py": "class Yume:\n    def generate(self):\n"
                     "        pass\n\ndef sample():\n    pass\n",
                     "ymod_for_runners.py": "class Yume:\n    def generate(self):\n        pass\n"})
    return checkout


def test_yume_resolve_finds_a_method_of_a_class_of_a_top_level_module(yume_pkg):
    import ymod_for_runners

    assert yume.resolve("ymod_for_runners.Yume.generate") == (ymod_for_runners.Yume, "generate")


def test_yume_resolve_imports_the_longest_module_prefix_first(yume_pkg):
    owner, attr = yume.resolve("ypkg_for_runners.wan.sample")  # the submodule is not imported yet
    assert (owner.__name__, attr) == ("ypkg_for_runners.wan", "sample")
    owner, attr = yume.resolve("ypkg_for_runners.wan.Yume.generate")
    assert (owner, attr) == (sys.modules["ypkg_for_runners.wan"].Yume, "generate")


def test_yume_resolve_never_imports_the_last_part(yume_pkg):
    owner, attr = yume.resolve("ypkg_for_runners.wan")
    assert (owner.__name__, attr) == ("ypkg_for_runners", "wan")


def test_yume_resolve_stops_when_nothing_imports(yume_pkg):
    with pytest.raises(SystemExit, match=r"^shim: cannot import 'nosuch_for_runners.f' from the YUME checkout$"):
        yume.resolve("nosuch_for_runners.f")


def _fake_transformers():
    class Auto:
        @classmethod
        def from_pretrained(cls, path, *args, **kwargs):
            return (cls.__name__, path, args, kwargs)

    return types.SimpleNamespace(AutoModel=type("AutoModel", (Auto,), {}),
                                 AutoTokenizer=type("AutoTokenizer", (Auto,), {}))


def test_yume_the_verbatim_captioner_answers_with_the_prompt_and_has_no_tokenizer():
    fake = _fake_transformers()
    yume.patch_captioner("A red kettle.", transformers=fake)
    model = fake.AutoModel.from_pretrained("harness://verbatim-prompt", torch_dtype=None).eval().to("cuda", 0)
    assert isinstance(model, yume.VerbatimCaptioner)
    assert model.chat(None, None, "question", {"max_new_tokens": 1}) == "A red kettle."
    assert fake.AutoTokenizer.from_pretrained("harness://verbatim-prompt", use_fast=False) is None
    assert fake.AutoModel.from_pretrained("/w", 1, a=2) == ("AutoModel", "/w", (1,), {"a": 2})
    assert fake.AutoTokenizer.from_pretrained("/t") == ("AutoTokenizer", "/t", (), {})


def test_yume_the_captioner_patch_defaults_to_the_environments_transformers(monkeypatch):
    fake = _fake_transformers()
    monkeypatch.setitem(sys.modules, "transformers", types.ModuleType("transformers"))
    sys.modules["transformers"].AutoModel, sys.modules["transformers"].AutoTokenizer = fake.AutoModel, fake.AutoTokenizer
    yume.patch_captioner("P.")
    assert fake.AutoModel.from_pretrained("harness://verbatim-prompt").chat(None, None, None) == "P."


@pytest.fixture
def yume_setup(checkout, monkeypatch):
    original, seen = _recording_generate()
    cls = type("Yume", (), {"generate": original})
    standin(monkeypatch, "ywan_for_runners", Yume=cls)
    (checkout / "caption.txt").write_text("a. \nb. \n")
    (checkout / "prompt.txt").write_text("  A kettle.\n")
    fake = _fake_transformers()
    tr = standin(monkeypatch, "transformers", AutoModel=fake.AutoModel, AutoTokenizer=fake.AutoTokenizer)
    return checkout, cls, seen, tr


def _yume_opts(*extra):
    return yume.build_parser().parse_args(["--seed", "4", "--captions", "caption.txt", "--generate",
                                           "ywan_for_runners.Yume.generate", *extra])


def test_yume_patch_wraps_generate_and_edits_nothing_without_paths(yume_setup):
    _, cls, seen, tr = yume_setup
    assert yume.patch(_yume_opts()) == []
    assert cls.generate.harness_shim is True
    cls().generate("x")
    cls().generate("a. R")
    assert seen == [("x", 4), ("b. R", 5)]
    assert tr.AutoTokenizer.from_pretrained("harness://verbatim-prompt") == \
        ("AutoTokenizer", "harness://verbatim-prompt", (), {})  # no stand-in without --verbatim-prompt


def test_yume_patch_points_the_two_hard_coded_paths_at_the_checkpoint_and_captioner(yume_setup):
    root = yume_setup[0]
    assert yume.patch(_yume_opts("--checkpoint", "w", "--captioner", "cap")) == [
        ('"./Yume-5B-720P"', repr(str(root / "w"))),
        ("'/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct'", repr(str(root / "cap")))]
    assert yume.patch(_yume_opts("--captioner", "cap")) == [
        ("'/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct'", repr(str(root / "cap")))]


def test_yume_patch_with_a_verbatim_prompt_points_the_captioner_at_the_stand_in(yume_setup):
    tr = yume_setup[3]
    assert yume.patch(_yume_opts("--verbatim-prompt", "prompt.txt")) == [
        ("'/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct'", "'harness://verbatim-prompt'")]
    assert tr.AutoModel.from_pretrained("harness://verbatim-prompt").chat(None, None, None) == "A kettle."


def test_yume_runner_as_a_script_gives_each_stage_its_own_line_and_the_edited_paths(yume_setup):
    root, _, seen, _ = yume_setup
    write(root, {"fastvideo/sample/sample_5b.py": (
        "import sys, transformers, ywan_for_runners as w\n"
        "CKPT = \"./Yume-5B-720P\"\n"
        "CAPTIONER = '/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct'\n"
        "model = transformers.AutoModel.from_pretrained(CAPTIONER)\n"
        "resp = model.chat(transformers.AutoTokenizer.from_pretrained(CAPTIONER), None, 'q')\n"
        "lines = open('caption.txt').read().splitlines()\n"
        "y = w.Yume()\n"
        "y.generate(lines[0] + resp)\n"
        "for s in range(len(lines) - 1):\n"
        "    y.generate(lines[s] + resp)\n"
        "w.OUT = (CKPT, CAPTIONER, sys.argv, sys.path[:5])\n")})
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.yume.runner", "--seed", "7", "--captions", "caption.txt", "--generate",
                  "ywan_for_runners.Yume.generate", "--checkpoint", "ckpt", "--verbatim-prompt", "prompt.txt", "--",
                  "fastvideo/sample/sample_5b.py", "--steps", "2")
    assert seen == [("a. A kettle.", 7), ("b. A kettle.", 8)]
    ckpt, captioner, argv, path = sys.modules["ywan_for_runners"].OUT
    assert (ckpt, captioner, argv) == (str(root / "ckpt"), "harness://verbatim-prompt",
                                       ["fastvideo/sample/sample_5b.py", "--steps", "2"])
    assert path == [str(root / "fastvideo" / "sample"), str(root), str(root), str(ROOT), "/nowhere"]


# -- DreamX --------------------------------------------------------------------------------------------------------

CAMERA_ROWS = [[0.0, 0.5, 0.9, 0.5, 0.5, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0],
               [1.0, 0.5, 0.9, 0.5, 0.5, 0, 0, 1, 0, 0, 0.1, 0, 1, 0, 0, 0, 0, 1, -0.2]]


def test_dreamx_camera_rows_skip_the_header_and_blank_lines(tmp_path):
    p = tmp_path / "cameras.txt"
    p.write_text("frame fx fy cx cy\n0 0.5 0.9 0.5 0.5\n\n  \n1 1e-1 -2 3 4\n")
    assert dreamx.read_rows(str(p)) == [[0.0, 0.5, 0.9, 0.5, 0.5], [1.0, 0.1, -2.0, 3.0, 4.0]]


def test_dreamx_the_generator_returns_no_plucker_the_rows_and_one_key_per_frame():
    gen = dreamx.make_generator(CAMERA_ROWS)
    plucker, cam, keys = gen(trajectory_spec=[{"a": 1}], num_frames=2, return_cam_params=True)
    assert plucker is None and keys == [None, None] and gen.harness_shim is True
    assert cam.dtype == np.float32 and np.array_equal(cam, np.asarray(CAMERA_ROWS, np.float32))
    assert gen([], None, return_cam_params=True)[1].shape == (2, 19)  # no frame count: nothing to compare


def test_dreamx_the_generator_refuses_another_frame_count_naming_both():
    with pytest.raises(SystemExit, match=r"^shim: upstream asks for 3 camera rows, the harness compiled 2 "
                                         r"\(--num_output_frames does not match cameras.txt\)$"):
        dreamx.make_generator(CAMERA_ROWS)([], 3, return_cam_params=True)


def test_dreamx_the_generator_refuses_a_call_without_return_cam_params():
    with pytest.raises(SystemExit, match=r"^shim: generate_trajectory_from_json was called without "
                                         r"return_cam_params=True; the call site differs from a1f4c6e5e456$"):
        dreamx.make_generator(CAMERA_ROWS)(trajectory_spec=[], num_frames=2)


def test_dreamx_full_kv_rewrites_both_literals_to_880_tokens_a_latent():
    assert dreamx.full_kv_patches(126) == [
        ("pipeline.pipeline_causal_camera", [("kv_cache_size = 18480", "kv_cache_size = 110880")]),
        ("wan.modules.causal_camera_model_2_2_prope_infinity", [("39600", "110880")])]
    assert dreamx.full_kv_patches("21")[1][1] == [("39600", "18480")]  # 21 latents: upstream's own size


def test_dreamx_the_wrapper_always_builds_its_model_without_a_window():
    class Wrapper:
        def __init__(self, model_name="m", local_attn_size=12, **kwargs):
            self.got = (model_name, local_attn_size, kwargs)

    assert dreamx.force_full_window(Wrapper) is Wrapper
    assert Wrapper("x", local_attn_size=12, sink=3).got == ("x", -1, {"sink": 3})
    assert Wrapper().got == ("m", -1, {})


def _dreamx_checkout(root) -> None:
    lines = ["frame fx fy cx cy 0 0 w2c"] + [" ".join(str(v) for v in r) for r in CAMERA_ROWS]
    write(root, {
        "cameras.txt": "\n".join(lines) + "\n",
        "wan/__init__.py": "", "wan/modules/__init__.py": "",
        "wan/modules/causal_camera_model_2_2_prope_infinity.py": "max_attention_size = 39600\n",
        "pipeline/__init__.py": "",
        "pipeline/pipeline_causal_camera.py": "from wan.modules.causal_camera_model_2_2_prope_infinity import "
                                              "max_attention_size\nkv_cache_size = 18480\n",
        "utils/__init__.py": "",
        "utils/wan_wrapper.py": "class WanDiffusionCameraWrapper:\n    def __init__(self, local_attn_size=12):\n"
                                "        self.local_attn_size = local_attn_size\n",
        "utils/trajectory_processor.py": "def generate_trajectory_from_json(trajectory_spec=None, num_frames=None, "
                                         "return_cam_params=False):\n    return 'native'\n",
        "inference_ar_forcing.py": (
            "import json, sys\n"
            "from utils.trajectory_processor import generate_trajectory_from_json\n"
            "import pipeline.pipeline_causal_camera as p, utils.wan_wrapper as w\n"
            "_, cam, keys = generate_trajectory_from_json(trajectory_spec=[], num_frames=2, return_cam_params=True)\n"
            "json.dump({'cam': cam.tolist(), 'kv': [p.kv_cache_size, p.max_attention_size],"
            " 'window': w.WanDiffusionCameraWrapper().local_attn_size, 'path': sys.path[:5]}, open('out.json', 'w'))\n"),
    })


def _dreamx_state():
    return (sys.modules["wan.modules.causal_camera_model_2_2_prope_infinity"].max_attention_size,
            sys.modules["pipeline.pipeline_causal_camera"].kv_cache_size,
            sys.modules["pipeline.pipeline_causal_camera"].max_attention_size,
            sys.modules["utils.wan_wrapper"].WanDiffusionCameraWrapper().local_attn_size)


def test_dreamx_patch_with_full_kv_rewrites_the_model_before_the_pipeline_and_drops_the_window(checkout):
    _dreamx_checkout(checkout)
    dreamx.patch(dreamx.build_parser().parse_args(["--seed", "1", "--cameras", "cameras.txt", "--full-kv", "2"]))
    assert _dreamx_state() == (1760, 1760, 1760, -1)
    tp = sys.modules["utils.trajectory_processor"]
    assert np.array_equal(tp.generate_trajectory_from_json([], 2, return_cam_params=True)[1],
                          np.asarray(CAMERA_ROWS, np.float32))


def test_dreamx_patch_without_full_kv_leaves_upstreams_window_and_literals(checkout):
    _dreamx_checkout(checkout)
    dreamx.patch(dreamx.build_parser().parse_args(["--seed", "1", "--cameras", "cameras.txt"]))
    for module in ("pipeline.pipeline_causal_camera", "utils.wan_wrapper"):  # as upstream imports them
        importlib.import_module(module)
    assert _dreamx_state() == (39600, 18480, 39600, 12)
    assert sys.modules["utils.trajectory_processor"].generate_trajectory_from_json.harness_shim is True


def test_dreamx_runner_as_a_script_runs_upstream_with_the_harness_cameras_and_full_kv(checkout):
    _dreamx_checkout(checkout)
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.dreamx.runner", "--seed", "3", "--cameras", "cameras.txt", "--full-kv", "3", "--",
                  "inference_ar_forcing.py")
    out = json.loads((checkout / "out.json").read_text())
    assert np.allclose(out["cam"], CAMERA_ROWS) and out["kv"] == [2640, 2640] and out["window"] == -1
    assert out["path"] == [str(checkout), str(checkout), str(checkout), str(ROOT), "/nowhere"]


# -- Matrix-Game 3 -------------------------------------------------------------------------------------------------


@pytest.fixture
def mg3_upstream(monkeypatch):
    """``utils.utils`` with the pin's ``get_data`` signature and recording stand-ins of the integrator."""
    seen = {}

    def get_data(num_frames, height, width, pil_image, device=None, dtype=None):
        seen["get_data"] = (num_frames, height, width, pil_image, device, dtype)
        return "IMAGE", "upstream extrinsics", "upstream keys", "upstream mouse"

    def compute_all_poses_from_actions(kb, ms, first_pose=None, return_last_pose=False):
        seen["poses"] = (kb.copy(), ms.copy(), np.array(first_pose))
        return np.arange(len(kb) * 5, dtype=float).reshape(len(kb), 5)

    def get_extrinsics(rotations, positions):
        seen["extrinsics"] = (rotations, positions)
        return "EXTRINSICS"

    mod = standin(monkeypatch, "utils.utils", get_data=get_data, get_extrinsics=get_extrinsics,
                  compute_all_poses_from_actions=compute_all_poses_from_actions)
    return mod, seen


KEYS = np.array([[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 1, 0], [0, 0, 0, 1, 0, 1]], np.float32)
MOUSE = np.array([[0.1, 0], [0, -0.2], [0.3, 0.3], [0, 0]], np.float32)


def test_mg3_get_data_keeps_upstreams_image_and_integrates_the_harness_actions(mg3_upstream, torch):
    mod, seen = mg3_upstream
    get_data = mg3.make_get_data(mod.get_data, KEYS, MOUSE)
    image, extrinsics, kb, ms = get_data(3, 704, 1280, "pil", device="cpu", dtype=torch.float64)
    assert (image, extrinsics) == ("IMAGE", "EXTRINSICS") and get_data.harness_shim is True
    assert seen["get_data"] == (3, 704, 1280, "pil", "cpu", torch.float64)
    assert np.array_equal(seen["poses"][0], KEYS[:3]) and np.array_equal(seen["poses"][1], MOUSE[:3])
    assert np.array_equal(seen["poses"][2], np.zeros(5))
    # poses rows are [x, y, z, pitch, yaw]: rotations (0, pitch, yaw), positions (x, y, z)
    assert seen["extrinsics"] == ([[0.0, 3.0, 4.0], [0.0, 8.0, 9.0], [0.0, 13.0, 14.0]],
                                  [[0.0, 1.0, 2.0], [5.0, 6.0, 7.0], [10.0, 11.0, 12.0]])
    assert tuple(kb.shape) == (1, 3, 6) and tuple(ms.shape) == (1, 3, 2) and kb.dtype == torch.float64
    assert np.array_equal(kb[0].numpy(), KEYS[:3]) and np.array_equal(ms[0].numpy(), MOUSE[:3])


def test_mg3_get_data_takes_exactly_as_many_frames_as_it_has(mg3_upstream, torch):
    mod, _ = mg3_upstream
    _, _, kb, ms = mg3.make_get_data(mod.get_data, KEYS, MOUSE)(4, 8, 8, None, device="cpu", dtype=torch.float32)
    assert tuple(kb.shape) == (1, 4, 6) and tuple(ms.shape) == (1, 4, 2)


def test_mg3_only_pitch_and_yaw_of_upstreams_pose_rows_become_rotations(mg3_upstream, torch):
    mod, seen = mg3_upstream
    mod.compute_all_poses_from_actions = lambda kb, ms, first_pose=None: np.arange(12.0).reshape(2, 6)  # a wider row
    mg3.make_get_data(mod.get_data, KEYS, MOUSE)(2, 8, 8, None, device="cpu", dtype=torch.float32)
    assert seen["extrinsics"] == ([[0.0, 3.0, 4.0], [0.0, 9.0, 10.0]], [[0.0, 1.0, 2.0], [6.0, 7.0, 8.0]])


@pytest.mark.parametrize("keys,mouse", [(KEYS[:2], MOUSE), (KEYS, MOUSE[:2])])
def test_mg3_get_data_refuses_fewer_keyboard_or_mouse_frames_than_asked(mg3_upstream, keys, mouse):
    mod, _ = mg3_upstream
    with pytest.raises(SystemExit, match=rf"^shim: the compiled actions have {len(keys)} frames, upstream asks for 3 "
                                         r"\(num_iterations does not match the compiled trajectory\)$"):
        mg3.make_get_data(mod.get_data, keys, mouse)(3, 8, 8, None)


def test_mg3_get_data_scales_the_keys_and_passes_only_what_the_original_accepts(mg3_upstream, torch):
    mod, seen = mg3_upstream
    got = []

    def later(num_frames, height, width, pil_image, device=None, dtype=None, key_strength=1.0):
        got.append(key_strength)
        return "LATER", None, None, None

    later.__module__ = "utils.utils"
    mg3.make_get_data(mod.get_data, KEYS, MOUSE)(2, 8, 8, None, device="cpu", dtype=torch.float32,
                                                  key_strength=0.5, other=1)
    assert np.array_equal(seen["poses"][0], KEYS[:2] * 0.5)  # the pin takes no key_strength: not passed on
    image = mg3.make_get_data(later, KEYS, MOUSE)(2, 8, 8, None, device="cpu", dtype=torch.float32,
                                                  key_strength=0.25, other=1)[0]
    assert image == "LATER" and got == [0.25]


def test_mg3_process_video_writes_the_frames_as_floats_in_0_1_at_the_fps(tmp_path):
    got = []
    pv = mg3.make_process_video(17.0, export=lambda frames, path, fps: got.append((frames, path, fps)))
    video = np.array([[[[0, 255, 51]]], [[[255, 0, 102]]]], np.uint8)  # (T=2, H=1, W=1, 3)
    out = str(tmp_path / "out.mp4")
    assert pv(video, out, None, "mouse.png", mouse_scale=0.1, default_frame_res=(1, 1)) is None
    (frames, path, fps), = got
    assert (path, fps) == (out, 17.0) and pv.harness_shim is True
    assert len(frames) == 2 and all(f.dtype == np.float32 for f in frames)
    assert np.array_equal(np.stack(frames), np.array([[[[0, 1, 0.2]]], [[[1, 0, 0.4]]]], np.float32))


def test_mg3_process_video_writes_with_the_environments_diffusers_by_default(monkeypatch):
    got = []
    standin(monkeypatch, "diffusers")
    standin(monkeypatch, "diffusers.utils", export_to_video=lambda frames, path, fps: got.append((len(frames), path,
                                                                                                  fps)))
    mg3.make_process_video(16)(np.zeros((3, 2, 2, 3), np.uint8), "v.mp4")
    assert got == [(3, "v.mp4", 16)]


def test_mg3_patch_replaces_get_data_and_process_video_where_upstream_imported_them(checkout, monkeypatch,
                                                                                  mg3_upstream, torch):
    mod, _ = mg3_upstream
    written = []
    vis = standin(monkeypatch, "utils.visualize", process_video=lambda *a, **k: "drawn")
    user = standin(monkeypatch, "pipeline.inference_pipeline", get_data=mod.get_data, process_video=vis.process_video)
    standin(monkeypatch, "diffusers")
    standin(monkeypatch, "diffusers.utils", export_to_video=lambda frames, path, fps: written.append((path, fps)))
    np.save(checkout / "k.npy", KEYS)
    np.save(checkout / "m.npy", MOUSE)
    mg3.patch(mg3.build_parser().parse_args(["--seed", "1", "--keyboard", "k.npy", "--mouse", "m.npy", "--fps", "17"]))
    _, _, kb, ms = user.get_data(4, 8, 8, None, device="cpu", dtype=torch.float32)
    assert np.array_equal(kb[0].numpy(), KEYS) and np.array_equal(ms[0].numpy(), MOUSE)
    user.process_video(np.zeros((1, 1, 1, 3), np.uint8), "video.mp4", None, None)
    assert written == [("video.mp4", 17.0)] and mod.get_data.harness_shim is vis.process_video.harness_shim is True


def test_mg3_runner_as_a_script_runs_upstream_with_the_compiled_actions(checkout, monkeypatch, mg3_upstream, torch):
    mod, _ = mg3_upstream
    written = []
    standin(monkeypatch, "utils.visualize", process_video=lambda *a, **k: "drawn")
    standin(monkeypatch, "diffusers")
    standin(monkeypatch, "diffusers.utils", export_to_video=lambda frames, path, fps: written.append((path, fps)))
    np.save(checkout / "k.npy", KEYS)
    np.save(checkout / "m.npy", MOUSE)
    write(checkout, {"generate.py": (
        "import sys, torch\n"
        "uu, vis = sys.modules['utils.utils'], sys.modules['utils.visualize']\n"
        "uu.OUT = uu.get_data(2, 8, 8, None, device='cpu', dtype=torch.float32)[2].tolist(), sys.path[:5]\n"
        "vis.process_video(uu.OUT[0], 'video.mp4', None, None)\n")})
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.matrix_game3.runner", "--seed", "1", "--keyboard", "k.npy", "--mouse", "m.npy", "--fps",
                  "17", "--", "generate.py")
    keys, path = mod.OUT
    assert keys == [KEYS[:2].tolist()] and written == [("video.mp4", 17.0)]
    assert path == [str(checkout), str(checkout), str(checkout), str(ROOT), "/nowhere"]


# -- Matrix-Game 3.5 -----------------------------------------------------------------------------------------------


def _mg35(checkout, *extra):
    return mg35.build_parser().parse_args(["--seed", "5", "--config-in", "in.yaml", "--config-out", "out.yaml", *extra])


def test_mg35_the_config_copy_carries_the_seed_in_both_keys_in_upstreams_key_order(checkout):
    (checkout / "in.yaml").write_text("zeta: 1\nseed: 3407\nvalidation_seed: 42\nalpha: [1, 2]\n")
    mg35.patch(_mg35(checkout))
    assert (checkout / "out.yaml").read_text() == "zeta: 1\nseed: 5\nvalidation_seed: 5\nalpha:\n- 1\n- 2\n"
    assert (checkout / "in.yaml").read_text().startswith("zeta: 1\nseed: 3407\n")  # upstream's file is untouched


def test_mg35_no_validation_seed_is_added_and_num_blocks_is_set_only_when_given(checkout):
    (checkout / "in.yaml").write_text("seed: 3407\nnum_blocks: 6\n")
    mg35.patch(_mg35(checkout))
    assert yaml.safe_load((checkout / "out.yaml").read_text()) == {"seed": 5, "num_blocks": 6}
    mg35.patch(_mg35(checkout, "--num-blocks", "9"))
    assert (checkout / "out.yaml").read_text() == "seed: 5\nnum_blocks: 9\n"


def test_mg35_runner_as_a_script_writes_the_config_then_runs_upstream(checkout):
    (checkout / "in.yaml").write_text("seed: 3407\n")
    write(checkout, {"infer_distilled.py": "import json, sys\njson.dump([open('out.yaml').read(), sys.argv, "
                                           "sys.path[:5]], open('ran.json', 'w'))\n"})
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.matrix_game35.runner", "--seed", "8", "--config-in", "in.yaml", "--config-out", "out.yaml",
                  "--num-blocks", "7", "--", "infer_distilled.py", "--config", "out.yaml")
    assert json.loads((checkout / "ran.json").read_text()) == [
        "seed: 8\nnum_blocks: 7\n", ["infer_distilled.py", "--config", "out.yaml"],
        [str(checkout), str(checkout), str(checkout), str(ROOT), "/nowhere"]]


# -- HY-WorldPlay --------------------------------------------------------------------------------------------------


def _selection(path, chunks):
    path.write_text(json.dumps({"policy": {"name": "fov"}, "chunk": 4, "chunks": chunks}))
    return str(path)


def test_hy_the_selector_returns_the_chunks_selection_as_ints():
    select = hy.make_selector({0: [], 4: [0, 2]})
    out = select(np.eye(4)[None], np.int64(4), memory_frames=20, temporal_context_size=12, pred_latent_size=4,
                 points_local=None, device="cpu")
    assert out == [0, 2] and all(type(i) is int for i in out) and select(None, 0) == []
    assert select.harness_shim is True


def test_hy_the_selector_stops_at_a_chunk_without_a_selection():
    with pytest.raises(SystemExit, match=r"^shim: no harness selection for the chunk starting at latent 8$"):
        hy.make_selector({0: [], 4: [0]})(None, 8.0)


def _hy_upstream(monkeypatch):
    def native(w2c, current_frame_idx, **kwargs):
        return "native"

    rc = standin(monkeypatch, "hyvideo.utils.retrieval_context", select_aligned_memory_frames=native)
    pipe = standin(monkeypatch, "hyvideo.pipelines.worldplay_video_pipeline", select_aligned_memory_frames=native)
    return rc, pipe


def test_hy_patch_with_a_selection_replaces_the_selector_where_the_pipeline_imported_it(checkout, monkeypatch):
    rc, pipe = _hy_upstream(monkeypatch)
    sel = _selection(checkout / "sel.json", [{"current": [0, 1, 2, 3], "context": []},
                                             {"current": [4, 5, 6, 7], "context": ["0", 3]}])
    hy.patch(hy.build_parser().parse_args(["--seed", "1", "--selection", sel]))
    assert pipe.select_aligned_memory_frames(None, 4) == rc.select_aligned_memory_frames(None, 4) == [0, 3]


def test_hy_patch_without_a_selection_keeps_upstreams_rule(checkout, monkeypatch):
    rc, pipe = _hy_upstream(monkeypatch)
    hy.patch(hy.build_parser().parse_args(["--seed", "1"]))
    assert pipe.select_aligned_memory_frames(None, 4) == rc.select_aligned_memory_frames(None, 4) == "native"


def test_hy_runner_as_a_script_runs_upstream_with_the_selection(checkout, monkeypatch):
    rc, _ = _hy_upstream(monkeypatch)
    sel = _selection(checkout / "sel.json", [{"current": [0, 1], "context": []}, {"current": [2, 3], "context": [1]}])
    write(checkout, {"hyvideo/generate.py": "import sys\nrc = sys.modules['hyvideo.utils.retrieval_context']\n"
                                            "rc.OUT = rc.select_aligned_memory_frames(None, 2), sys.path[:5]\n"})
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.hy_worldplay.runner", "--seed", "1", "--selection", sel, "--", "hyvideo/generate.py")
    assert rc.OUT == ([1], [str(checkout / "hyvideo"), str(checkout), str(checkout), str(ROOT), "/nowhere"])


# -- LingBot-World v2 FoV ------------------------------------------------------------------------------------------


def _kernel_recorder():
    calls = []

    def flash_attention(q, k, v, *args, **kwargs):
        calls.append((q, k, v, args, kwargs))
        return "attended"

    return flash_attention, calls


def _qkv(torch, q_tokens, k_tokens, heads=1):
    """[B, L, N, D] tensors whose keys count 0, 1, 2, ... along L (values: 100 more)."""
    k = torch.arange(k_tokens, dtype=torch.float32)[None, :, None, None].expand(1, k_tokens, heads, 1)
    return torch.zeros(1, q_tokens, heads, 1), k, k + 100


def test_fov_the_kernel_attends_to_the_selection_then_the_current_chunk(torch):
    original, calls = _kernel_recorder()
    kernel = fov.make_gather(original, {4: [0, 2], 5: [1]}, frame_seqlen=2, chunk=2)
    q, k, v = _qkv(torch, 4, 12)  # 6 frames of 2 tokens; the chunk is frames 4 and 5
    k_lens = torch.tensor([12], dtype=torch.int32)
    assert kernel(q, k, v, "causal", k_lens=k_lens, window_size=(-1, -1)) == "attended"
    (q2, k2, v2, args, kwargs), = calls
    assert q2 is q and args == ("causal",) and kwargs["window_size"] == (-1, -1)
    assert k2[0, :, 0, 0].tolist() == [0, 1, 4, 5, 8, 9, 10, 11]  # frames 0, 2 | 4, 5
    assert v2[0, :, 0, 0].tolist() == [100, 101, 104, 105, 108, 109, 110, 111]
    assert kwargs["k_lens"].tolist() == [8] and kwargs["k_lens"].dtype == torch.int32
    assert k_lens.tolist() == [12] and kernel.harness_fov is True


def test_fov_the_kernel_keeps_every_head_and_adds_no_k_lens(torch):
    original, calls = _kernel_recorder()
    q, k, v = _qkv(torch, 2, 6, heads=3)
    fov.make_gather(original, {2: [0]}, frame_seqlen=2, chunk=1)(q, k, v)
    (_, k2, _, _, kwargs), = calls
    assert tuple(k2.shape) == (1, 4, 3, 1) and k2[0, :, 2, 0].tolist() == [0, 1, 4, 5] and kwargs == {}
    fov.make_gather(original, {2: [0]}, frame_seqlen=2, chunk=1)(q, k, v, k_lens=None)
    assert calls[1][4] == {"k_lens": None} and calls[1][1][0, :, 0, 0].tolist() == [0, 1, 4, 5]


@pytest.mark.parametrize("q_tokens,k_tokens", [(4, 13), (3, 12), (4, 12)], ids=["keys", "queries", "no-selection"])
def test_fov_a_call_that_is_not_a_chunk_of_whole_frames_with_a_selection_passes_through(torch, q_tokens, k_tokens):
    original, calls = _kernel_recorder()
    table = {4: [0], 5: [0]} if q_tokens != 4 or k_tokens != 12 else {0: [], 2: [0]}
    q, k, v = _qkv(torch, q_tokens, k_tokens)
    fov.make_gather(original, table, frame_seqlen=2, chunk=2)(q, k, v, k_lens="kept")
    (q2, k2, v2, _, kwargs), = calls
    assert (q2, k2, v2, kwargs) == (q, k, v, {"k_lens": "kept"})


def test_fov_patch_wraps_every_named_kernel_where_it_was_imported(checkout, monkeypatch, torch):
    a, a_calls = _kernel_recorder()
    b, b_calls = _kernel_recorder()
    mod_a = standin(monkeypatch, "fovk_a_for_runners", flash_attention=a)
    mod_b = standin(monkeypatch, "fovk_b_for_runners", attn=b)
    user = standin(monkeypatch, "fovk_user_for_runners", flash_attention=a)
    sel = _selection(checkout / "sel.json", [{"current": [0, 1], "context": []}, {"current": [2, 3], "context": ["0"]}])
    fov.patch(fov.build_parser().parse_args(["--selection", sel, "--frame-seqlen", "2", "--kernels",
                                             "fovk_a_for_runners:flash_attention,fovk_b_for_runners:attn"]))
    assert mod_a.flash_attention is user.flash_attention and mod_a.flash_attention.harness_fov is True
    q, k, v = _qkv(torch, 4, 8)  # the chunk starting at frame 2
    user.flash_attention(q, k, v)
    mod_b.attn(q, k, v)
    assert a_calls[0][1][0, :, 0, 0].tolist() == b_calls[0][1][0, :, 0, 0].tolist() == [0, 1, 4, 5, 6, 7]


def test_fov_runner_as_a_script_runs_upstream_with_the_gathering_kernel(checkout, monkeypatch, torch):
    a, calls = _kernel_recorder()
    mod = standin(monkeypatch, "fovk_a_for_runners", flash_attention=a)
    sel = _selection(checkout / "sel.json", [{"current": [0, 1], "context": []}, {"current": [2, 3], "context": [1]}])
    write(checkout, {"generate.py": "import sys, torch\nm = sys.modules['fovk_a_for_runners']\n"
                                    "k = torch.arange(8.0)[None, :, None, None]\n"
                                    "m.OUT = m.flash_attention(torch.zeros(1, 4, 1, 1), k, k), sys.path[:5]\n"})
    sys.path[:] = ["/nowhere", *sys.path]
    run_as_script("adapters.lingbot_v2.fov_runner", "--selection", sel, "--frame-seqlen", "2", "--kernels",
                  "fovk_a_for_runners:flash_attention", "--seed", "2", "--", "generate.py")
    assert mod.OUT == ("attended", [str(checkout), str(checkout), str(checkout), str(ROOT), "/nowhere"])
    assert calls[0][1][0, :, 0, 0].tolist() == [2, 3, 4, 5, 6, 7]
