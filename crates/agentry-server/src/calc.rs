//! The arithmetic of the `calculate` tool: `+ - * /`, parentheses, decimals, unary minus and plus.
//!
//! The expression comes from a model (and so, indirectly, from whoever talks to it), so it is
//! bounded: at most [`MAX_EXPRESSION_CHARS`] characters and at most [`MAX_DEPTH`] levels of
//! nesting, where every parenthesis and every unary operator counts one level. The parser is
//! recursive descent with a depth counter checked before every recursive call, so its stack use
//! is bounded by `MAX_DEPTH` whatever the input.

/// The longest expression accepted, in characters, whitespace included.
pub const MAX_EXPRESSION_CHARS: usize = 1000;

/// The deepest nesting accepted: each `(` and each unary `-` or `+` opens one level.
pub const MAX_DEPTH: usize = 64;

/// Evaluates `expr`, or says what is wrong with it (too long, too deep, malformed, division by
/// zero, or a result that is not a finite number).
pub fn evaluate(expr: &str) -> Result<f64, String> {
    if expr.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(format!(
            "the expression is longer than {MAX_EXPRESSION_CHARS} characters"
        ));
    }
    let mut p = Parser {
        chars: expr.chars().filter(|c| !c.is_whitespace()).collect(),
        pos: 0,
        depth: 0,
    };
    if p.chars.is_empty() {
        return Err("the expression is empty".into());
    }
    let v = p.sum()?;
    if p.pos != p.chars.len() {
        return Err(format!(
            "unexpected '{}' at position {}",
            p.chars[p.pos],
            p.pos + 1
        ));
    }
    if !v.is_finite() {
        return Err("the result is not a finite number".into());
    }
    Ok(v)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// Levels currently open (parentheses and unary operators).
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// Runs `f` one level deeper, refusing to go beyond [`MAX_DEPTH`].
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<f64, String>) -> Result<f64, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            ));
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let r = self.product()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.pos += 1;
            let r = self.unary()?;
            if op == '/' && r == 0.0 {
                return Err("division by zero".into());
            }
            v = if op == '*' { v * r } else { v / r };
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.pos += 1;
                self.nested(|p| Ok(-p.unary()?))
            }
            Some('+') => {
                self.pos += 1;
                self.nested(Self::unary)
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let v = self.nested(Self::sum)?;
                if self.peek() != Some(')') {
                    return Err("missing ')'".into());
                }
                self.pos += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.pos += 1;
                }
                let s: String = self.chars[start..self.pos].iter().collect();
                s.parse::<f64>()
                    .map_err(|_| format!("'{s}' is not a number"))
            }
            Some(c) => Err(format!("unexpected '{c}' at position {}", self.pos + 1)),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evaluates on a thread with a small stack: an unbounded recursion would overflow it.
    fn evaluate_on_small_stack(expr: String) -> Result<f64, String> {
        std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || evaluate(&expr))
            .unwrap()
            .join()
            .unwrap()
    }

    fn nested_parens(levels: usize) -> String {
        format!("{}1{}", "(".repeat(levels), ")".repeat(levels))
    }

    #[test]
    fn arithmetic() {
        assert_eq!(evaluate("2 + 3 * 4").unwrap(), 14.0);
        assert_eq!(evaluate("(2 + 3) * 4.5").unwrap(), 22.5);
        assert_eq!(evaluate("-3 - -2").unwrap(), -1.0);
        assert_eq!(evaluate("10 / 4").unwrap(), 2.5);
        assert_eq!(evaluate("+2 * -(1 + 1)").unwrap(), -4.0);
    }

    #[test]
    fn bad_expressions_are_errors_not_panics() {
        for bad in ["", "2 +", "(1", "1 / 0", "2 ^ 3", "1..2", "abc", ")"] {
            assert!(evaluate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostile_expressions_are_refused_without_overflowing_the_stack() {
        for expr in [
            "(".repeat(20_000),
            "-".repeat(20_000),
            "+".repeat(20_000),
            "-(".repeat(5_000),
        ] {
            assert_eq!(
                evaluate_on_small_stack(expr).unwrap_err(),
                "the expression is longer than 1000 characters"
            );
        }
        for expr in [
            "(".repeat(MAX_EXPRESSION_CHARS),
            "-".repeat(MAX_EXPRESSION_CHARS),
            "+".repeat(MAX_EXPRESSION_CHARS),
            "-(".repeat(MAX_EXPRESSION_CHARS / 2),
            format!("{}1", "- ".repeat(MAX_EXPRESSION_CHARS / 2 - 1)),
        ] {
            assert_eq!(
                evaluate_on_small_stack(expr).unwrap_err(),
                "the expression nests deeper than 64 levels"
            );
        }
    }

    #[test]
    fn the_length_limit_counts_characters_with_whitespace() {
        let at_limit = format!("1{}", " ".repeat(MAX_EXPRESSION_CHARS - 1));
        assert_eq!(evaluate(&at_limit).unwrap(), 1.0);
        let over = format!("1{}", " ".repeat(MAX_EXPRESSION_CHARS));
        assert_eq!(
            evaluate(&over).unwrap_err(),
            "the expression is longer than 1000 characters"
        );
    }

    #[test]
    fn nesting_up_to_the_limit_evaluates() {
        assert_eq!(evaluate_on_small_stack(nested_parens(64)).unwrap(), 1.0);
        assert_eq!(
            evaluate_on_small_stack(nested_parens(65)).unwrap_err(),
            "the expression nests deeper than 64 levels"
        );
        assert_eq!(evaluate(&format!("{}1", "-".repeat(64))).unwrap(), 1.0);
        assert!(evaluate(&format!("{}1", "-".repeat(65))).is_err());
        // Sequential (not nested) parentheses do not add up.
        let flat = vec!["(1)"; 100].join("+");
        assert_eq!(evaluate(&flat).unwrap(), 100.0);
    }
}
