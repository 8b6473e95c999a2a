"""The model registry through the SDK: models, versions, labels, metadata, archive, delete."""

from __future__ import annotations

from typing import Any

import pytest

from determined.client import APIError, NotFoundError
from determined.experimental import Model, ModelSortBy, ModelVersion, OrderBy, client
from determined.master import Master


def test_models_and_versions(finished: Any, master: Master) -> None:
    client.login(master.url, "determined", "")
    ckpts = finished.list_checkpoints()
    model = client.create_model("sdk-model", "first model", {"team": "a"})
    assert isinstance(model, Model) and model.model_id and model.username == "determined"
    assert (model.description, model.metadata, model.archived) == (
        "first model",
        {"team": "a"},
        False,
    )
    assert model.creation_time is not None and model.last_updated_time is not None
    assert model.get_version() is None

    v1 = model.register_version(ckpts[0].uuid)
    v2 = model.register_version(ckpts[1].uuid)
    assert isinstance(v1, ModelVersion) and (v1.model_version, v2.model_version) == (1, 2)
    assert v1.checkpoint is not None and v1.checkpoint.uuid == ckpts[0].uuid
    assert v1.model_name == "sdk-model" and v1.model_id == model.model_id
    latest = model.get_version()
    assert latest is not None and latest.model_version == 2
    got = model.get_version(1)
    assert got is not None and got.checkpoint is not None
    assert got.checkpoint.training is not None
    assert got.checkpoint.training.validation_metrics["avgMetrics"]["val_loss"] == 0.2
    assert [v.model_version for v in model.list_versions()] == [2, 1]
    assert [v.model_version for v in model.list_versions(OrderBy.ASC)] == [1, 2]
    with pytest.warns(FutureWarning):
        assert [v.model_version for v in model.get_versions()] == [2, 1]
    with pytest.raises(NotFoundError, match="version 9"):
        model.get_version(9)
    with pytest.raises(NotFoundError, match="checkpoint no-such"):
        model.register_version("no-such")

    v1.set_name("champion")
    v1.set_notes("read me")
    v1.set_labels(["prod", "v1"])
    v1.add_metadata({"accuracy": 0.9})
    again = model.get_version(1)
    assert again is not None
    assert (again.name, again.notes, again.labels) == ("champion", "read me", ["prod", "v1"])
    assert again.metadata == {"accuracy": 0.9}
    v2.delete()
    v2_gone = model.list_versions()
    assert [v.model_version for v in v2_gone] == [1]
    v1.reload()
    assert v1.name == "champion"

    model.add_metadata({"owner": "me"})
    model.remove_metadata(["team"])
    model.set_labels(["vision", "prod"])
    model.set_description("better description")
    model.move_to_workspace("Uncategorized")
    with pytest.raises(NotFoundError, match="workspace"):
        model.move_to_workspace("elsewhere")
    fetched = client.get_model("sdk-model")
    assert fetched.metadata == {"owner": "me"} and fetched.labels == ["vision", "prod"]
    assert fetched.description == "better description"
    assert client.get_model(model.model_id or 0).name == "sdk-model"
    with pytest.warns(FutureWarning):
        assert client.get_model_by_id(model.model_id or 0).name == "sdk-model"
    assert "vision" in client.get_model_labels()

    model.archive()
    assert client.get_model("sdk-model").archived
    with pytest.raises(APIError, match="archived"):
        model.register_version(ckpts[0].uuid)
    model.unarchive()
    model.reload()
    assert model.archived is False

    model.delete()
    with pytest.raises(NotFoundError, match="sdk-model"):
        client.get_model("sdk-model")


def test_list_models(master: Master) -> None:
    sdk = client.Determined(master.url, "determined", "")
    sdk.create_model("zeta-list", "Last of them", labels=["x"])
    sdk.create_model("alpha-list", "first of them")
    sdk.create_model("Mid-List", "middle one")
    names = [m.name for m in sdk.list_models(name="-list")]
    assert names == ["alpha-list", "Mid-List", "zeta-list"]
    newest = sdk.list_models(ModelSortBy.CREATION_TIME, OrderBy.DESC, name="-list")
    assert [m.name for m in newest] == ["Mid-List", "alpha-list", "zeta-list"]
    assert [m.name for m in sdk.list_models(description="LAST")] == ["zeta-list"]
    zeta = sdk.get_model("zeta-list")
    assert [m.name for m in sdk.list_models(model_id=zeta.model_id)] == ["zeta-list"]
    assert len(sdk.list_models(workspace_names=["Uncategorized"], name="-list")) == 3
    assert sdk.list_models(workspace_ids=[7], name="-list") == []
    with pytest.warns(FutureWarning):
        assert len(sdk.get_models(name="-list")) == 3
    client.login(master.url, "determined", "")
    assert [m.name for m in client.list_models(name="alpha")] == ["alpha-list"]
    with pytest.warns(FutureWarning):
        assert [m.name for m in client.get_models(name="mid")] == ["Mid-List"]
    with pytest.raises(APIError, match="already exists"):
        client.create_model("ZETA-LIST")
    with pytest.raises(ValueError, match="sort_by"):
        sdk.list_models(sort_by="size")  # type: ignore[arg-type]
