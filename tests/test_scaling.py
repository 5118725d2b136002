"""The multi-GPU launch files and commands, checked the way accelerate, TRL and the command line read them (no GPU needed)."""
import dataclasses
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from search_r1_course.config import RECIPES_DIR
from search_r1_course.scaling import (ACCELERATE_DIR, accelerate_config, launch_commands, load_accelerate_config,
                                      write_accelerate_configs)

CONFIGS = sorted(ACCELERATE_DIR.glob("*.yaml"))
NAME = re.compile(r"zero(?P<stage>[23])-(?P<gpus>\d+)gpu\.yaml")


def test_the_repository_ships_zero2_and_zero3_for_1_4_and_8_gpus():
    assert [p.name for p in CONFIGS] == [f"zero{z}-{n}gpu.yaml" for z in (2, 3) for n in (1, 4, 8)]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_each_accelerate_config_has_the_keys_its_name_promises(path):
    values = yaml.safe_load(path.read_text())
    m = NAME.fullmatch(path.name)
    assert m, f"{path.name}: expected a name zero<stage>-<n>gpu.yaml"
    assert values["compute_environment"] == "LOCAL_MACHINE"
    assert values["distributed_type"] == "DEEPSPEED"
    assert values["mixed_precision"] == "bf16"
    assert values["num_processes"] == int(m["gpus"]), f"{path.name}: num_processes {values['num_processes']}"
    assert values["deepspeed_config"]["zero_stage"] == int(m["stage"])
    assert values == accelerate_config(int(m["stage"]), int(m["gpus"]))   # the files are what the notebook writes


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_accelerates_own_config_class_loads_each_file(path):
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DistributedType
    cfg = ClusterConfig.from_yaml_file(str(path))   # refuses keys it does not know
    m = NAME.fullmatch(path.name)
    assert cfg.distributed_type == DistributedType.DEEPSPEED
    assert (cfg.num_processes, cfg.deepspeed_config["zero_stage"]) == (int(m["gpus"]), int(m["stage"]))
    assert load_accelerate_config(path).num_processes == cfg.num_processes


def test_written_files_are_rewritten_identically(tmp_path):
    for p in write_accelerate_configs(tmp_path):
        assert p.read_text() == (ACCELERATE_DIR / p.name).read_text(), p.name


def test_a_config_that_is_not_deepspeed_is_refused(tmp_path):
    bad = tmp_path / "ddp.yaml"
    bad.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    with pytest.raises(ValueError, match="expected distributed_type DEEPSPEED"):
        load_accelerate_config(bad)


def _launch(argv):
    "What `accelerate launch` would run for `argv`: its parsed arguments and the DeepSpeed environment (accelerate 1.15's launcher functions)."
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import prepare_deepspeed_cmd_env
    args, defaults, mp_from_config = _validate_launch_command(launch_command_parser().parse_args(argv))
    args.deepspeed_fields_from_accelerate_config = ",".join(list(defaults.deepspeed_config) + ["mixed_precision"] * mp_from_config)
    _, env = prepare_deepspeed_cmd_env(args)
    return args, {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}


def test_accelerate_launch_turns_the_server_mode_command_into_a_zero3_deepspeed_run(monkeypatch):
    train_line = launch_commands("gpu-qwen2.5-3b", 8, "server", zero=3, vllm_gpus=2, retriever_gpus=2)[-1]
    words = shlex.split(train_line)
    assert words[0] == "CUDA_VISIBLE_DEVICES=4,5,6,7"
    args, env = _launch(words[words.index("launch") + 1:])
    assert (args.use_deepspeed, args.num_processes, args.module, args.training_script) == (True, 4, True, "search_r1_course.cli")
    assert args.training_script_args[:3] == ["train", "--config", "gpu-qwen2.5-3b"]
    assert (env["ACCELERATE_USE_DEEPSPEED"], env["ACCELERATE_DEEPSPEED_ZERO_STAGE"], env["ACCELERATE_MIXED_PRECISION"]) == ("true", "3", "bf16")
    for k, v in env.items(): monkeypatch.setenv(k, v)
    from accelerate.utils import DeepSpeedPlugin
    ds = DeepSpeedPlugin().deepspeed_config     # the DeepSpeed config TRL's trainer will be given
    assert ds["zero_optimization"]["stage"] == 3
    assert ds["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    assert ds["gradient_accumulation_steps"] == "auto"   # filled from TRL's GRPOConfig


def test_python_dash_m_runs_the_command_line():
    r = subprocess.run([sys.executable, "-m", "search_r1_course.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(cmd in r.stdout for cmd in ("train", "serve-retriever", "eval"))


def test_grpo_config_receives_the_vllm_server_address(tmp_path):
    from search_r1_course.trainer import get_preset, grpo_args
    cfg = get_preset("gpu", output_dir=str(tmp_path), dtype="fp32", vllm_mode="server", vllm_server_host="10.1.2.3",
                     vllm_server_port=8123)
    args = grpo_args(cfg, device="cuda")     # fp32: GRPOConfig refuses bf16 where no GPU is present
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_host, args.vllm_server_port) == (True, "server", "10.1.2.3", 8123)
    assert grpo_args(dataclasses.replace(cfg, vllm_mode="colocate"), device="cuda").vllm_server_port == 8123


def test_the_launchers_world_size_shares_out_a_steps_micro_batches(tmp_path, monkeypatch):
    from search_r1_course.trainer import get_preset, grpo_args
    cfg = get_preset("gpu", output_dir=str(tmp_path), dtype="fp32")
    for world, accumulation in ((1, 40), (4, 10), (5, 8), (8, 5)):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        args = grpo_args(cfg, device="cuda")
        assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (8, accumulation), world
        assert args.per_device_train_batch_size * accumulation * world == args.generation_batch_size == 320
    monkeypatch.setenv("WORLD_SIZE", "6")
    with pytest.raises(ValueError, match="shared by the 6 training processes"):
        grpo_args(cfg, device="cuda")


def test_every_trainer_line_parses_with_the_command_line():
    from search_r1_course.cli import parse_command
    runs = [launch_commands("gpu-qwen2.5-3b", 8), launch_commands("gpu-qwen3-4b", 4, zero=2),
            launch_commands("gpu-qwen2.5-3b", 8, "server", vllm_gpus=2, retriever_gpus=2),
            launch_commands("gpu-qwen3-4b", 1, zero=0, options=["--lora", "true"])]
    for lines in runs:
        words = shlex.split(lines[-1])
        cfg, _ = parse_command("train", words[words.index("train") + 1:])
        if "--config_file" in words:
            assert (RECIPES_DIR.parent / words[words.index("--config_file") + 1]).is_file()
        if cfg.vllm_mode == "server":
            assert f"--port {cfg.vllm_server_port}" in lines[1] and "vllm serve" in lines[1]
    with pytest.raises(ValueError, match="leave no GPU to train on"):
        launch_commands("gpu-qwen2.5-3b", 2, "server", vllm_gpus=1, retriever_gpus=1)
