//! Summary statistics, written once for every experiment, benchmark and test: mean, median,
//! quantiles and Jain's fairness index.
//!
//! # Definitions
//!
//! - [`mean`]: the arithmetic mean, summed left to right.
//! - [`median`] (and [`Sorted::median`]): the middle value; for an even count the mean of the
//!   two middle values (Hyndman and Fan's type 7 at p = 0.5).
//! - [`Sorted::quantile`]`(q)`: **no interpolation** — the order statistic at 0-based index
//!   `round((n - 1) q)`, halves rounded up (Hyndman and Fan's type 7 position, rounded to the
//!   nearest order statistic instead of interpolated). Its `quantile(0.5)` is the *upper*
//!   median `x[n / 2]`, which differs from [`median`] for an even count. Both definitions are
//!   kept because both are in use and changing either would change published numbers: the
//!   experiments' tables and the probe benchmark use [`median`]; the experiments' p50/p90/p99
//!   columns, the delay-box benchmark and the tests' "median" use [`Sorted::quantile`].
//! - [`jain_index`]: Jain, Chiu and Hawe, "A quantitative measure of fairness and discrimination
//!   for resource allocation in shared computer systems", DEC TR-301, 1984:
//!   `(Σ x)^2 / (n Σ x^2)`, 1 when all are equal, `1/n` when one takes everything.
//!
//! Reference for the quantile types: R. J. Hyndman and Y. Fan, "Sample quantiles in statistical
//! packages", The American Statistician 50(4), 1996.
//!
//! # Empty input and NaN
//!
//! Every function returns `None` for an empty input (and [`jain_index`] also when every value is
//! 0), never a panic; callers that print a table write the `None` as they choose. Values are
//! ordered by [`f64::total_cmp`], so a NaN sorts after +∞ (a negative NaN before −∞) instead of
//! making the order undefined.

use std::ops::Deref;

/// The arithmetic mean; `None` for no values.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The median (mean of the two middle values for an even count); `None` for no values. Sorts a
/// copy; with several statistics of one sample, build a [`Sorted`] once instead.
pub fn median(xs: &[f64]) -> Option<f64> {
    Sorted::from(xs).median()
}

/// Jain's fairness index `(Σ x)^2 / (n Σ x^2)` (see the module documentation); `None` for no
/// values or when all are 0.
pub fn jain_index(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return None;
    }
    Some(sum * sum / (xs.len() as f64 * squares))
}

/// A sample sorted ascending by [`f64::total_cmp`]: the type says the sorting was done, so order
/// statistics cannot be taken from an unsorted slice. Reads as a `&[f64]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sorted(Vec<f64>);

impl Sorted {
    /// Sorts `values`.
    pub fn new(mut values: Vec<f64>) -> Sorted {
        values.sort_by(f64::total_cmp);
        Sorted(values)
    }

    /// The median (mean of the two middle values for an even count); `None` when empty.
    pub fn median(&self) -> Option<f64> {
        let v = &self.0;
        let n = v.len();
        if n == 0 {
            None
        } else if n % 2 == 1 {
            Some(v[n / 2])
        } else {
            Some((v[n / 2 - 1] + v[n / 2]) / 2.0)
        }
    }

    /// The order statistic at 0-based index `round((n - 1) q)` (no interpolation; see the module
    /// documentation). `q` is clamped to [0, 1]; `None` when empty or `q` is NaN.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.0.is_empty() || q.is_nan() {
            return None;
        }
        let index = ((self.0.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        Some(self.0[index])
    }

    /// The sorted values.
    pub fn into_vec(self) -> Vec<f64> {
        self.0
    }
}

impl From<&[f64]> for Sorted {
    fn from(values: &[f64]) -> Sorted {
        Sorted::new(values.to_vec())
    }
}

impl From<Vec<f64>> for Sorted {
    fn from(values: Vec<f64>) -> Sorted {
        Sorted::new(values)
    }
}

impl FromIterator<f64> for Sorted {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Sorted {
        Sorted::new(iter.into_iter().collect())
    }
}

impl Deref for Sorted {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_of_values_and_of_nothing() {
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(&[-4.0]), Some(-4.0));
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn median_odd_even_unsorted_and_empty() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5), "even: mean of the middle two");
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        // The input is not reordered.
        let xs = [3.0, 1.0, 2.0];
        assert_eq!(median(&xs), Some(2.0));
        assert_eq!(xs, [3.0, 1.0, 2.0]);
        // NaN sorts last: it does not poison the middle of a mostly-numeric sample.
        assert_eq!(median(&[f64::NAN, 1.0, 2.0, 3.0, 4.0]), Some(3.0));
    }

    #[test]
    fn quantile_is_the_nearest_order_statistic_without_interpolation() {
        let s = Sorted::new(vec![40.0, 10.0, 30.0, 20.0]);
        assert_eq!(&*s, &[10.0, 20.0, 30.0, 40.0]);
        assert_eq!(s.quantile(0.0), Some(10.0));
        assert_eq!(s.quantile(1.0), Some(40.0));
        // index round(3 * 0.5) = round(1.5) = 2: the upper median, unlike median() = 25.
        assert_eq!(s.quantile(0.5), Some(30.0));
        assert_eq!(s.median(), Some(25.0));
        // round(3 * 0.4) = 1, round(3 * 0.9) = 3.
        assert_eq!(s.quantile(0.4), Some(20.0));
        assert_eq!(s.quantile(0.9), Some(40.0));
        // p99 of 0..=100 is 99.
        let hundred: Sorted = (0..=100).map(f64::from).collect();
        assert_eq!(hundred.quantile(0.99), Some(99.0));
        // Out-of-range q is clamped; NaN q and an empty sample give None.
        assert_eq!(s.quantile(-1.0), Some(10.0));
        assert_eq!(s.quantile(7.0), Some(40.0));
        assert_eq!(s.quantile(f64::NAN), None);
        assert_eq!(Sorted::default().quantile(0.5), None);
        assert_eq!(Sorted::default().median(), None);
        assert_eq!(Sorted::from(&[2.0, 1.0][..]).into_vec(), vec![1.0, 2.0]);
    }

    #[test]
    fn jain_index_bounds_and_degenerate_inputs() {
        assert_eq!(jain_index(&[3.0, 3.0, 3.0, 3.0]), Some(1.0));
        assert_eq!(jain_index(&[5.0, 0.0, 0.0, 0.0]), Some(0.25), "one takes all: 1/n");
        // (1 + 3)^2 / (2 (1 + 9)) = 0.8
        assert_eq!(jain_index(&[1.0, 3.0]), Some(0.8));
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }
}
