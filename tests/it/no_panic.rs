//! No input makes validation panic: random bytes, mutated real specs, deep nesting, huge numbers, a 10 MB file.
//! Inputs are generated from a fixed seed, so a failure reproduces.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use trainbench::spec::{Overrides, SpecValidator};

/// xorshift64*: a tiny deterministic generator, enough to vary inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    ",",
    ".",
    "\"",
    "'",
    "\n",
    " ",
    "#",
    "model",
    "family",
    "resnet",
    "custom",
    "layers",
    "type",
    "linear",
    "sweep",
    "batch_sizes",
    "topology",
    "device",
    "cuda:0",
    "run",
    "warmup",
    "1",
    "-1",
    "0",
    "1e400",
    "nan",
    "inf",
    "99999999999999999999",
    "true",
    "1979-05-27T00:00:00Z",
    "\"\"\"",
    "'''",
    "\\u0000",
    "é",
    "\u{0}",
    "\u{7f}",
    "version",
    "name",
    "training",
    "optimizer",
    "kind",
    "adam",
    "precision",
    "fp16",
    "strategy",
];

fn real_specs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["specs/smoke", "specs/tbd", "specs/extra", "specs/pai", "tests/invalid"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut entries: Vec<_> = std::fs::read_dir(path).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        out.extend(
            entries.iter().filter(|p| p.extension().is_some_and(|e| e == "toml")).map(|p| std::fs::read(p).unwrap()),
        );
    }
    out
}

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..1 + rng.below(6) {
        match rng.below(6) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] = rng.next() as u8;
            }
            1 if !bytes.is_empty() => {
                let cut = rng.below(bytes.len());
                bytes.truncate(cut);
            }
            2 => {
                let i = rng.below(bytes.len() + 1);
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                bytes.splice(i..i, token.iter().copied());
            }
            3 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                let j = (i + rng.below(64)).min(bytes.len());
                bytes.drain(i..j);
            }
            4 => {
                let i = rng.below(bytes.len() + 1);
                let depth = rng.below(120);
                let nested = format!("x = {}1{}\n", "[".repeat(depth), "]".repeat(depth));
                bytes.splice(i..i, nested.bytes());
            }
            _ => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if lines.len() > 1 {
                    let a = rng.below(lines.len());
                    let b = rng.below(lines.len());
                    lines.swap(a, b);
                }
                bytes = lines.join("\n").into_bytes();
            }
        }
    }
    bytes
}

#[test]
fn generated_garbage_never_panics() {
    let validator = SpecValidator::new().unwrap();
    let bases = real_specs();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let overrides = Overrides::parse(&["run.iterations=5".to_string()]).unwrap();
    let mut invalid = 0;
    for i in 0..3000 {
        let input: Vec<u8> = match i % 4 {
            0 => (0..rng.below(2048)).map(|_| rng.next() as u8).collect(),
            1 => {
                (0..rng.below(200)).flat_map(|_| TOKENS[rng.below(TOKENS.len())].bytes().collect::<Vec<_>>()).collect()
            }
            _ => {
                let base = &bases[rng.below(bases.len())];
                mutate(&mut rng, base)
            }
        };
        let o = if i % 3 == 0 { &overrides } else { &Overrides::none() };
        let checked = validator.check_bytes("fuzz.toml", &input, None, o);
        if checked.spec.is_none() {
            invalid += 1;
            assert!(
                !checked.diagnostics.is_empty(),
                "invalid input without a diagnostic: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
        let _ = trainbench::spec::diagnostics::render_text(&checked.diagnostics);
        let _ = serde_json::to_string(&checked.diagnostics).unwrap();
    }
    assert!(invalid > 2000, "the generator should mostly produce invalid specs ({invalid})");
}

#[test]
fn extreme_inputs_are_diagnosed() {
    let validator = SpecValidator::new().unwrap();
    let big_line = format!("version = 1\nname = \"x\"\ndescription = \"{}\"\n", "a".repeat(10 << 20));
    let deep = format!("version = 1\nname = \"x\"\ntags = {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("whitespace", b"  \n\t\n".to_vec()),
        ("ten-megabytes", big_line.into_bytes()),
        ("deep-arrays", deep.into_bytes()),
        ("deep-inline-tables", format!("x = {}1{}", "{a = ".repeat(5000), "}".repeat(5000)).into_bytes()),
        ("huge-int", b"version = 1\nname = \"x\"\n[run]\niterations = 123456789012345678901234567890123456789012345678901234567890\n".to_vec()),
        ("huge-float", b"version = 1\nname = \"x\"\n[training]\nloss_scale = 1e999\n".to_vec()),
        ("all-bytes", (0..=255u8).collect()),
        ("bom", b"\xef\xbb\xbfversion = 1\n".to_vec()),
        ("many-keys", (0..50_000).map(|i| format!("k{i} = {i}\n")).collect::<String>().into_bytes()),
        ("many-errors", (0..2_000).map(|i| format!("[t{i}]\nk = 1\n")).collect::<String>().into_bytes()),
    ];
    for (name, bytes) in cases {
        let checked = validator.check_bytes(name, &bytes, None, &Overrides::none());
        assert!(checked.spec.is_none(), "{name} validated");
        assert!(!checked.diagnostics.is_empty(), "{name}: no diagnostic");
        for d in &checked.diagnostics {
            assert!(d.snippet.as_ref().is_none_or(|s| s.text.chars().count() <= 110), "{name}: snippet too long");
        }
    }
}

#[test]
fn the_cli_exits_2_on_a_ten_megabyte_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.toml");
    std::fs::write(&path, format!("version = 1\nname = \"x\"\n# {}\n", "x".repeat(10 << 20))).unwrap();
    let o = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench")).arg("validate").arg(&path).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("the most a spec may hold"));
}

#[cfg(unix)]
#[test]
fn an_endless_device_file_is_cut_off() {
    if !Path::new("/dev/zero").exists() {
        trainbench_contract::conformance::prerequisite_missing("/dev/zero does not exist on this unix machine");
        return;
    }
    let o = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .arg("validate")
        .arg("/dev/zero")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("the most a spec may hold"));
}

/// Every command that prints to stdout, with the reading end of the pipe closed before it writes (as
/// `trainbench ... | head` does): the command must not panic, and its exit code stays its own.
#[test]
fn a_closed_stdout_pipe_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commands: &[&[&str]] = &[
        &["schema"],
        &["schema", "--result"],
        &["devices"],
        &["validate", "specs/"],
        &["plan", "specs/tbd/resnet50.toml"],
        &["analyze", "specs/tbd/resnet50.toml"],
        &["run", "specs/smoke/mlp.toml", "--backend", "mock", "--quiet", "--format", "json"],
    ];
    for args in commands {
        let tmp = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainbench"));
        cmd.current_dir(root).args(*args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if args[0] == "run" {
            cmd.arg("--out").arg(tmp.path());
        }
        let mut child = cmd.spawn().unwrap();
        drop(child.stdout.take()); // close the reading end before anything is written
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "`trainbench {}` panicked on a closed pipe:\n{stderr}", args.join(" "));
        assert_ne!(out.status.code(), Some(101), "`trainbench {}`", args.join(" "));
    }
}
