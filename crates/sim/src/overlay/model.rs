//! Analytic models of Fig. 3 (filled in below).
