//! The arithmetic of the `calculate` tool: `+ - * /`, parentheses, decimals, unary minus.

/// Evaluates `expr`, or says what is wrong with it.
pub fn evaluate(expr: &str) -> Result<f64, String> {
    let mut p = Parser {
        chars: expr.chars().filter(|c| !c.is_whitespace()).collect(),
        pos: 0,
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
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
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
                Ok(-self.unary()?)
            }
            Some('+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let v = self.sum()?;
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
    use super::evaluate;

    #[test]
    fn arithmetic() {
        assert_eq!(evaluate("2 + 3 * 4").unwrap(), 14.0);
        assert_eq!(evaluate("(2 + 3) * 4.5").unwrap(), 22.5);
        assert_eq!(evaluate("-3 - -2").unwrap(), -1.0);
        assert_eq!(evaluate("10 / 4").unwrap(), 2.5);
    }

    #[test]
    fn bad_expressions_are_errors_not_panics() {
        for bad in ["", "2 +", "(1", "1 / 0", "2 ^ 3", "1..2", "abc", ")"] {
            assert!(evaluate(bad).is_err(), "{bad}");
        }
    }
}
