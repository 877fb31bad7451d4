"""The corpus of real graphs and the audit set: their registries, and the compact profiles
committed beside them."""

import os

import pandas as pd
import pytest

from tf_placeto.examples import audit, corpus, held_out
from tf_placeto.placers.compact import SUFFIX, CompactProfile


def test_every_model_has_a_unique_name_and_a_known_family():
    assert len(corpus.MODELS) == len(corpus.ENTRIES), "two entries share a name"
    assert all(model.family in corpus.FAMILIES for model in corpus.ENTRIES)
    assert set(corpus.families_of()) == set(corpus.FAMILIES), "a family without a model"
    assert all(model.description and callable(model.builder) for model in corpus.ENTRIES)


def test_the_corpus_has_many_families_several_of_two_models_or_more():
    sizes = pd.Series({family: len(names) for family, names in corpus.families_of().items()})
    assert len(sizes) >= 6 and (sizes >= 2).sum() >= 6, sizes.to_dict()


def test_held_out_and_enas_models_are_reused_not_copied():
    """The held-out real models and the ENAS-like families keep their own builders."""
    assert corpus.MODELS["resnet50"].builder is held_out.resnet50
    assert corpus.MODELS["lstm"].builder is held_out.lstm
    enas = [m for m in corpus.ENTRIES if m.family in corpus.ENAS_FAMILIES.values()]
    assert {m.builder.func for m in enas} == {corpus.enas}
    assert {m.builder.args[0] for m in enas} == set(corpus.ENAS_FAMILIES)


@pytest.mark.parametrize("folder, models, least", [(corpus.PROFILES, corpus.MODELS, 12),
                                                     (audit.PROFILES, audit.MODELS, 6)])
def test_the_manifest_lists_the_committed_profiles_as_they_are(folder, models, least):
    """Each committed file loads, names the model and family the registry gives it, and
    holds the ops and groups the manifest says; all of them together stay small."""
    table = pd.read_csv(os.path.join(folder, "manifest.csv"))
    files = sorted(name for name in os.listdir(folder) if name.endswith(SUFFIX))
    assert sorted(table["name"] + SUFFIX) == files and len(files) >= least
    for row in table.itertuples():
        profile = CompactProfile.load(os.path.join(folder, row.name + SUFFIX))
        assert (profile.name, profile.family) == (row.name, models[row.name].family)
        assert (profile.meta["ops"], profile.meta["groups"]) == (row.ops, row.groups)
        assert os.path.getsize(os.path.join(folder, row.name + SUFFIX)) == row.bytes
    assert table["bytes"].sum() < 5 * 2**20


def test_the_audit_set_shares_no_family_or_name_with_the_corpus():
    """What the policy trains on (the corpus) never holds an audit family or model."""
    from tf_placeto.placers.corpus_problems import load_profiles

    assert len(audit.MODELS) == len(audit.ENTRIES), "two entries share a name"
    assert {m.family for m in audit.ENTRIES} == set(audit.FAMILIES)
    assert not set(audit.FAMILIES) & set(corpus.FAMILIES)
    assert not set(audit.MODELS) & set(corpus.MODELS)
    trained_on = load_profiles()
    assert not {p.family for p in trained_on} & set(audit.FAMILIES)
    assert {p.family for p in load_profiles(audit.PROFILES)} == set(audit.FAMILIES)


@pytest.mark.parametrize("name", ["wide_and_deep", "control_flow"])
def test_a_committed_profile_places_on_more_devices(name):
    """A committed profile states problems for other device counts, without the model."""
    profile = CompactProfile.load(os.path.join(corpus.PROFILES, name + SUFFIX))
    for n_devices in (1, 4):
        problem = profile.problem(n_devices)
        assert problem.n_devices == n_devices and problem.n_groups == profile.meta["groups"]
        assert problem.evaluate([0] * problem.n_groups).us_per_step > 0
