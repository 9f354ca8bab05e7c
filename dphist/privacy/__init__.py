"""The privacy kernel: exact samplers, the bit sources they read, and the budget object that is the only way the
rest of dphist draws noise (``budget.PrivacyBudget``), and the accountant that adds up what the releases of a data
set spent (``accountant``)."""

from .amounts import (MAX_EPSILON, MAX_RHO, MIN_EPSILON, MIN_RHO, exact_fraction, format_fraction, parse_delta,
                      parse_epsilon, parse_rho, parse_share)
from .bits import BitSource, SeededBits, SimulationBits, SystemBits, bit_source
from .conversions import ConversionError, delta_for, epsilon_for, loose_epsilon, loose_rho, rho_for
from .budget import (BudgetExceeded, Draw, PrivacyBudget, Selection, ZCDPBudget, epsilon_within, equal_part,
                     per_row_amount, per_row_epsilon_like, protected_rows, set_aside, split_shares, total_of)
from .measurement import Measurement
from .samplers import (discrete_laplace_halfwidth, discrete_laplace_pmf, discrete_laplace_tail,
                       discrete_laplace_tail_threshold, discrete_laplace_variance)
from .samplers import (checked_sigma2, discrete_gaussian_halfwidth, discrete_gaussian_pmf,
                       discrete_gaussian_variance)

__all__ = ["equal_part", "total_of", "set_aside", "protected_rows", "ConversionError", "delta_for", "epsilon_for", "loose_epsilon", "loose_rho", "rho_for",
           "MAX_EPSILON", "MAX_RHO", "MIN_EPSILON", "MIN_RHO", "BitSource", "BudgetExceeded", "Draw", "Measurement", "PrivacyBudget",
           "SeededBits", "Selection", "SimulationBits", "SystemBits", "ZCDPBudget", "epsilon_within", "bit_source", "discrete_laplace_halfwidth", "discrete_laplace_pmf",
           "discrete_laplace_variance", "exact_fraction", "format_fraction", "parse_delta", "parse_epsilon",
           "parse_rho", "parse_share", "split_shares", "per_row_amount", "per_row_epsilon_like",
           "discrete_laplace_tail", "discrete_laplace_tail_threshold",
           "checked_sigma2", "discrete_gaussian_halfwidth", "discrete_gaussian_pmf", "discrete_gaussian_variance"]
