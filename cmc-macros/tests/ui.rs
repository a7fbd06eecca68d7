//! The mistakes the macros catch, each with the error the user sees, and
//! programs that must compile and run.

#[test]
#[ignore = "compiles every case against a build of its own of the runtime (bash scripts/test.sh --full runs it)"]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/*.rs");
}
