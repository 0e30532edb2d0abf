"""Early stopping of fine-tuning (``patience``): from the settings to the config, the cache key and the
plateau precondition."""

from types import SimpleNamespace

from longdoc.experiments.fitting import train_key
from longdoc.experiments.preconditions import reached_plateau
from longdoc.experiments.settings import BudgetSettings


def budget(**changes) -> BudgetSettings:
    return BudgetSettings(**({"train_steps": 40, "batch_size": 8, "dev_evals": 4, "learning_rates": [1e-4]} | changes))


def test_patience_reaches_the_training_config_and_enters_the_key_only_when_set():
    without, with_patience = budget().train_config(1e-4, 0), budget(patience=2).train_config(1e-4, 0)
    assert without.patience == 0 and with_patience.patience == 2 and with_patience.eval_every == 10
    assert "patience" not in train_key(without)  # the key of every run made before patience existed
    assert train_key(with_patience)["patience"] == 2 and train_key(with_patience) != train_key(without)


def test_a_row_trained_with_patience_must_reach_its_dev_plateau():
    def study(training, plateau_family=False):
        family = SimpleNamespace(trains_to_plateau=plateau_family)
        result = SimpleNamespace(system=SimpleNamespace(family=family), training=training)
        return SimpleNamespace(results={"row": result})

    fixed = [{"best_step": 40, "dev_curve": [[20, 0.1], [40, 0.2]]}]
    assert reached_plateau(study(fixed), "row") is None  # a fixed budget: no plateau is promised
    peaked = [{"best_step": 20, "dev_curve": [[20, 0.3], [40, 0.2], [60, 0.2]], "patience": 2}]
    still_rising = [{"best_step": 40, "dev_curve": [[20, 0.1], [40, 0.2]], "patience": 2}]
    assert reached_plateau(study(peaked), "row").holds
    assert not reached_plateau(study(still_rising), "row").holds
