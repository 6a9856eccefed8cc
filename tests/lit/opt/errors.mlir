// Bad command lines exit 2; bad IR exits 1 and names the location (with --split-input-file,
// lines count from the top of the file).
// RUN: not tilecraft-opt %s --no-such-pass 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tilecraft-opt %s --tilecraft-schedule="no-such-option=1" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not tilecraft-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not tilecraft-opt %S/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING

// UNKNOWN: 'no-such-pass' does not refer to a registered pass
// OPTION: pass 'tilecraft-schedule' has no option 'no-such-option=1'
// MISSING: cannot read {{.*}}does-not-exist.mlir

func.func @fine() {
  return
}
// -----
func.func @wrong_return(%x: i32) -> i32 {
  // PARSE: errors.mlir:[[# @LINE + 1]]:3: error: 'func.return' op has 0 operands, but enclosing function (@wrong_return) returns 1
  return
}
