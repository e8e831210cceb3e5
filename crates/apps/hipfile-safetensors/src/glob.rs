//! Tensor-name filters: a glob of `*` (any run of characters, `.` included) and `?` (any one
//! character). Tensor names have no path structure worth more than that, so a dependency
//! would add nothing.

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Vec<char>,
}

impl Glob {
    /// The glob `pattern`; every character but `*` and `?` matches itself.
    pub fn new(pattern: &str) -> Glob {
        Glob {
            pattern: pattern.chars().collect(),
        }
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let text: Vec<char> = name.chars().collect();
        let (p, t) = (&self.pattern, &text);
        let (mut pi, mut ti) = (0, 0);
        // Where the last `*` was, and the text position it currently stands for the end of.
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some('*') => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(&c) if c == '?' || c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    // Let the last `*` take one more character, and try again after it.
                    Some((sp, st)) => {
                        star = Some((sp, st + 1));
                        pi = sp + 1;
                        ti = st + 1;
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn star_and_question_mark() {
        let m = |p: &str, t: &str| Glob::new(p).matches(t);
        assert!(m("*", ""));
        assert!(m("*", "model.layers.0.mlp"));
        assert!(m(
            "model.layers.*.q_proj.weight",
            "model.layers.17.q_proj.weight"
        ));
        assert!(!m(
            "model.layers.*.q_proj.weight",
            "model.layers.17.k_proj.weight"
        ));
        assert!(m("model.layers.?.*", "model.layers.3.mlp.up_proj.weight"));
        assert!(!m("model.layers.?.*", "model.layers.13.mlp.up_proj.weight"));
        assert!(m("*norm*", "model.layers.2.input_layernorm.weight"));
        assert!(m("a*b*c", "aXXbYYbZc"));
        assert!(!m("a*b*c", "aXXbYYbZ"));
        assert!(m("abc", "abc"));
        assert!(!m("abc", "abcd"));
        assert!(!m("abcd", "abc"));
        assert!(m("**x", "yyx"));
        assert!(m("é?", "éü"));
    }
}
