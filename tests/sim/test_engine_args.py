import argparse
import dataclasses

import pytest

from jevserve.serving import EngineConfig
from jevserve.sim.engine_args import HELP, add_engine_arguments, add_replica_arguments, engine_config_from_args


def parse(argv, base=None):
    parser = argparse.ArgumentParser()
    add_replica_arguments(parser, base)
    return parser.parse_args(argv)


def test_every_engine_setting_has_a_line_of_help_so_every_command_gets_its_option():
    assert set(HELP) == {f.name for f in dataclasses.fields(EngineConfig)}


def test_options_not_given_keep_the_base_configuration():
    base = EngineConfig(max_num_seqs=2, prefix_caching=True)
    assert engine_config_from_args(parse([]), base) == base
    assert engine_config_from_args(parse([])) == EngineConfig()


def test_given_options_override_the_base():
    args = parse(["--max-num-seqs", "8", "--no-prefix-caching", "--kv-admission", "chunk",
                  "--long-prefill-token-threshold", "64", "--no-hol-blocking"])
    config = engine_config_from_args(args, EngineConfig(prefix_caching=True))
    assert (config.max_num_seqs, config.prefix_caching, config.kv_admission) == (8, False, "chunk")
    assert (config.long_prefill_token_threshold, config.head_of_line_blocking) == (64, False)


def test_a_bad_value_is_refused_naming_its_flag(capsys):
    # the flag the user typed, not the settings' field (max_num_seqs=0), and 0 where 0 means off
    for argv, said in ((["--max-num-seqs", "0"], "--max-num-seqs '0': expected an integer >= 1"),
                       (["--num-kv-blocks", "0"], "--num-kv-blocks '0': expected an integer >= 1"),
                       (["--long-prefill-token-threshold", "-1"], "expected an integer >= 0")):
        with pytest.raises(SystemExit):
            parse(argv)
        assert said in capsys.readouterr().err
    assert engine_config_from_args(parse(["--long-prefill-token-threshold", "0"])).long_prefill_token_threshold == 0
    with pytest.raises(ValueError, match="max_num_seqs=0"):  # the settings still check themselves
        EngineConfig(max_num_seqs=0)


def test_help_shows_the_defaults_of_the_settings_a_command_starts_from():
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser, EngineConfig(max_num_seqs=256))
    assert "(default: 256)" in parser.format_help()
