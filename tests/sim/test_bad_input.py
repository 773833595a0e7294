"""Every bad input of issue 14 (point 6) exits with status 2 and a message naming the flag and the value."""

import pytest

from jevserve.cli import main


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse rejects a bad value before the command runs
        return int(exc.code)


@pytest.fixture
def latin1_trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_bytes('{"prompt_tokens": 5, "output_tokens": 3, "note": "caf\u00e9"}\n'.encode("latin-1"))
    return path


@pytest.mark.parametrize("argv, message", [
    (["sim", "run", "--aging-s", "-1"], "--aging-s '-1': expected a finite number > 0"),
    (["sim", "run", "--decision-delay-ms", "-5"], "--decision-delay-ms '-5': expected a finite number >= 0"),
    (["sim", "run", "--slo-ttft-ms", "-1"], "--slo-ttft-ms '-1': expected a finite number > 0"),
    (["sim", "run", "--rate", "inf"], "--rate 'inf': expected a finite number > 0"),
    (["sim", "run", "--arrivals", "weibull"], "unknown arrival process 'weibull'"),
    (["sim", "cluster", "--replicas", "0"], "--replicas '0': expected an integer >= 1"),
    (["sim", "cluster", "--aging-s", "-2"], "--aging-s '-2'"),
    (["sim", "cluster", "--rates", "1,inf"], "'1,inf': expected finite numbers > 0"),
    (["sim", "queue-order", "--aging-s", "-1"], "--aging-s '-1'"),
    (["sim", "queue-order", "--decision-delay-ms", "-1"], "--decision-delay-ms '-1'"),
    (["sim", "queue-order", "--slo-ttft-ms", "0"], "--slo-ttft-ms '0'"),
    (["sim", "queue-order", "--arrivals", "mmpp:4:2"], "burst_share=2.0"),
    (["plan", "--rate", "inf"], "--rate 'inf': expected a finite number > 0"),
    (["plan", "--rate", "10", "--decision-delay-ms", "-1"], "--decision-delay-ms '-1'"),
    (["plan", "--rate", "10", "--slo-ttft-ms", "-1"], "--slo-ttft-ms '-1'"),
    # a negative seed was a numpy traceback (exit 1) in every command that takes one
    (["sim", "run", "--seed", "-1"], "'-1': a seed is an integer >= 0"),
    (["sim", "queue-order", "--seeds", "0,-1"], "'0,-1': seeds are integers >= 0"),
    (["sim", "cluster", "--seeds", "-1"], "'-1': seeds are integers >= 0"),
    (["sim", "cluster", "--workload-seed", "-1"], "'-1': a seed is an integer >= 0"),
    (["plan", "--rate", "10", "--workload-seed", "-1"], "'-1': a seed is an integer >= 0"),
    (["loadgen", "--seed", "-1"], "'-1': a seed is an integer >= 0"),
    (["engine", "--seed", "-1"], "'-1': a seed is an integer >= 0"),
    (["sim", "cluster", "--default-output-tokens", "0"], "--default-output-tokens '0': expected a finite number > 0"),
    (["sim", "queue-order", "--jobs", "0"], "--jobs '0': expected an integer >= 1"),
    (["plan", "table", "--jobs", "-3"], "--jobs '-3': expected an integer >= 1"),
    (["sim", "run", "--oracle-tau", "2"], "'2': expected a Kendall tau in (0, 1]"),
    (["plan", "table", "--oracle-tau", "0"], "'0': expected a Kendall tau in (0, 1]"),
    # a --cv the arrival process would ignore was dropped silently
    (["sim", "run", "--num-requests", "5", "--cv", "0.5"], "with --arrivals poisson it would be ignored"),
    (["sim", "run", "--num-requests", "5", "--arrivals", "gamma:2", "--cv", "0.5"], "with --arrivals gamma:2"),
    (["sim", "cluster", "--num-requests", "5", "--cv", "0.5"], "with --arrivals poisson it would be ignored"),
])
def test_a_bad_flag_value_exits_2_naming_the_flag_and_value(argv, message, capsys):
    assert _exit_code(argv) == 2
    assert message in capsys.readouterr().err


def test_trace_arrivals_on_a_workload_without_send_times_is_refused(capsys):
    assert _exit_code(["sim", "run", "--arrivals", "trace", "--num-requests", "5"]) == 2
    assert "--arrivals trace: workload 'sharegpt' has no send times" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["sim", "run", "--arrivals", "poisson", "--workload"],
    ["plan", "--rate", "10", "--workload"],
    ["sim", "calibrate", "--out", "x.toml"],
])
def test_a_non_utf8_file_exits_2_naming_the_file(argv, latin1_trace, capsys):
    argv = [*argv, str(latin1_trace)]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert str(latin1_trace) in err and "is not UTF-8 text" in err


@pytest.mark.parametrize(("argv", "flag", "command"), [
    (["plan", "--slo-ttft-ms", "5", "table", "--rate", "60", "--no-simulate"], "--slo-ttft-ms", "table"),
    (["plan", "--profile", "qwen3-8b-h100", "table", "--rate", "60", "--no-simulate"], "--profile", "table"),
    (["plan", "--rate", "60", "table", "--no-simulate"], "--rate", "table"),
    (["plan", "--attainment", "0.5", "validate"], "--attainment", "validate"),
])  # fmt: skip
def test_a_plan_option_before_its_subcommand_is_refused_not_dropped(argv, flag, command, capsys):
    assert _exit_code(argv) == 2
    assert f"{flag} before `{command}` would be ignored" in capsys.readouterr().err


def test_plan_table_without_a_rate_says_how_to_give_one(capsys):
    assert _exit_code(["plan", "table", "--no-simulate"]) == 2
    assert "--rate is required" in capsys.readouterr().err


def test_a_decision_delay_past_the_slo_is_named_as_the_cause(capsys):
    assert _exit_code(["plan", "--rate", "10", "--decision-delay-ms", "5000"]) == 2
    assert "--decision-delay-ms 5000 alone takes 500% of the TTFT target: shorten it" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "said"), [
    (["sim", "run", "--prompt-dist", "const:30000"], "--prompt-dist would be ignored"),
    (["sim", "run", "--workload", "synthetic", "--split", "test"], "--split would be ignored"),
    (["plan", "--rate", "10", "--output-dist", "const:5"], "--output-dist would be ignored"),
    (["plan", "table", "--rate", "10", "--profile", "qwen3-8b-h100", "--profiles", "qwen3-8b-h200"],
     "--profiles would be ignored"),
    (["loadgen", "--base-url", "http://127.0.0.1:9", "--port", "8000", "--model", "m"], "--port would be ignored"),
    (["loadgen", "--model", "m", "--result-dir", "out"], "--result-dir would be ignored"),
    (["loadgen", "--model", "m", "--burstiness", "2", "--arrival-process", "poisson"],
     "--burstiness would be ignored"),
])  # fmt: skip
def test_a_flag_the_command_would_ignore_is_refused(argv, said, capsys):
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_a_trace_sends_its_own_rows_and_refuses_num_requests(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"prompt_tokens": 5, "output_tokens": 3}\n')
    assert _exit_code(["sim", "run", "--workload", str(trace), "--num-requests", "5"]) == 2
    assert "a trace file's rows are the requests" in capsys.readouterr().err
    # and its send times take no rate (an outside tester's --rate 5 beside --arrivals trace went unsaid)
    trace.write_text('{"prompt_tokens": 5, "output_tokens": 3, "arrival_s": 0.5}\n')
    assert _exit_code(["sim", "run", "--workload", str(trace), "--arrivals", "trace", "--rate", "5"]) == 2
    assert "--rate would be ignored: --arrivals trace sends each request at its arrival_s" in capsys.readouterr().err
    assert _exit_code(["sim", "run", "--workload", str(trace), "--rate", "5"]) == 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--policy", "fcfs", "--predictions", "p.jsonl"],
         "--predictions would be ignored: queue policy 'fcfs' never reads predictions (these do: plf, plf-edf, "
         "plf-relage)"),
        (["--policy", "spf", "--oracle-tau", "0.3"], "--oracle-tau would be ignored: queue policy 'spf' never reads"),
        (["--policy", "plf", "--predictions", "p.jsonl", "--oracle-tau", "0.3"],
         "--oracle-tau would be ignored: --predictions gives the predictions"),
    ],
)
def test_prediction_flags_a_policy_would_not_read_are_refused(argv, says, capsys):
    assert main(["sim", "run", "--num-requests", "20", *argv]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["plf", "plf-edf", "plf-relage"])
def test_every_policy_that_reads_predictions_gets_the_noisy_oracle_without_a_file(policy, capsys):
    assert main(["sim", "run", "--num-requests", "30", "--rate", "5", "--policy", policy]) == 0
    assert "predictions: noisy oracle, Kendall tau" in capsys.readouterr().out


def test_plan_table_gives_every_policy_that_reads_predictions_the_decision_delay():
    from jevserve.plan.table import parse_policy

    delays = {name: parse_policy(name, aging_s=30.0, decision_delay_s=0.02).decision_delay_s
              for name in ("fcfs", "spf", "tlf", "plf", "plf-edf", "plf-relage+aging")}
    assert delays == {"fcfs": 0.0, "spf": 0.0, "tlf": 0.0, "plf": 0.02, "plf-edf": 0.02, "plf-relage+aging": 0.02}


@pytest.mark.parametrize("command", [["sim", "run"], ["plan", "--rate", "5"]])
def test_a_prompt_that_fills_the_context_is_refused_not_simulated_as_if_it_fitted(command, capsys):
    assert main([*command, "--num-requests", "20", "--max-model-len", "60"]) == 2
    err = capsys.readouterr().err
    assert "leaves no room for a reply within max_model_len=60" in err and "--max-model-len" in err


def test_replies_past_the_context_are_cut_where_it_ends():
    from jevserve.serving.types import Request
    from jevserve.sim.errors import WorkloadError
    from jevserve.sim.workloads.lengths import fit_context

    requests = [Request("a", 0.0, 100, 500), Request("b", 0.0, 100, 20), Request("c", 0.0, 100, None)]
    fitted = fit_context(requests, 300)
    assert [r.num_output_tokens for r in fitted] == [200, 20, None]
    with pytest.raises(WorkloadError, match="leaves no room"):
        fit_context([Request("d", 0.0, 300, 5)], 300)


def test_a_predictions_file_is_said_with_its_kendall_tau_as_the_stand_in_is(capsys):
    # an outside tester's run with --predictions FILE printed no tau, where the stand-in's run prints its own
    from pathlib import Path

    predictions = Path(__file__).resolve().parents[2] / "predictions" / "sharegpt-jev-minilm-2.jsonl"
    assert main(["sim", "run", "--num-requests", "50", "--rate", "1", "--policy", "plf",
                 "--predictions", str(predictions)]) == 0
    said = capsys.readouterr().out
    assert f"predictions: {predictions}, Kendall tau " in said and "with the true lengths (50 requests)" in said


@pytest.mark.parametrize("command", [["sim", "run"], ["engine"]])
@pytest.mark.parametrize("value", ["0", "1"])
def test_a_context_with_no_room_for_a_prompt_and_a_reply_is_refused_by_one_rule(command, value, capsys):
    # `--max-model-len 0` was told ">= 1" and `--max-model-len 1` then ">= 2"
    with pytest.raises(SystemExit) as exc:
        main([*command, "--max-model-len", value])
    assert exc.value.code == 2
    assert f"--max-model-len '{value}': expected an integer >= 2 (a prompt token and a reply token)" in (
        capsys.readouterr().err)
