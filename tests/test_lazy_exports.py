import sys

import pytest


def test_a_package_imports_an_export_only_when_it_is_used(tmp_path, monkeypatch):
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from jevserve import lazy_exports\n__getattr__ = lazy_exports(__name__, {'Heavy': 'heavy'})\n"
    )
    (package / "heavy.py").write_text("class Heavy:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazypkg", raising=False)
    monkeypatch.delitem(sys.modules, "lazypkg.heavy", raising=False)

    import lazypkg

    assert "lazypkg.heavy" not in sys.modules
    assert lazypkg.Heavy.__name__ == "Heavy" and "lazypkg.heavy" in sys.modules
    assert "Heavy" in vars(lazypkg)  # cached: the next access does not go through __getattr__
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'Light'"):
        lazypkg.Light  # noqa: B018
    from lazypkg import Heavy

    assert Heavy is lazypkg.Heavy
