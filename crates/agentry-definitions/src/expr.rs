//! jq runtime expressions (a helper writes this module).
