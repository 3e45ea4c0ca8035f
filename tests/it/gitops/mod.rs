//! `aigw validate`, `plan`, `export` and `history`, the GitOps modes and promotion.

mod cli;
mod history_secrecy;
mod hostile_plan;
mod modes;
mod promotion;
