;; The line printer of engine/line-printer.ts: one call writes a run of a document's lines,
;; each as a prefix, its number and a separator byte, then the line's bytes. A loop in
;; JavaScript pays a native call for each copy, two a line; here a copy is a loop of 8-byte
;; words. Compiled to the bytes line-printer.ts holds by scripts/line-printer-wasm.ts;
;; test/line-printer.test.ts fails when the two differ.
(module
  (memory (export "memory") 1)

  ;; Writes `count` lines at `out` and returns where the output ends. The caller has copied
  ;; into this memory: the lines' bytes at `text` (the document's bytes from offset `base` on),
  ;; their `count` start offsets at `starts` (offsets in the document, u16 when `wide` is 0, else
  ;; u32, as the document's value holds them), and `prefix`
  ;; (`plen` bytes). `to` is where the last line ends in the document. Up to 7 bytes past the
  ;; output's end and past the copied text may be written or read (see $copy). Each line is written as
  ;; the prefix, then, when `width` >= 0, its number (from `number` on, one more each line)
  ;; left-padded with spaces to `width` and the byte `sep`, then its bytes.
  (func (export "lines")
    (param $text i32) (param $starts i32) (param $wide i32) (param $count i32) (param $base i32) (param $to i32)
    (param $number i32) (param $prefix i32) (param $plen i32) (param $width i32) (param $sep i32)
    (param $out i32)
    (result i32)
    (local $i i32) (local $start i32) (local $end i32)
    (block $done
      (loop $line
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $out (call $head (local.get $out) (local.get $prefix) (local.get $plen) (local.get $number) (local.get $width) (local.get $sep)))
        ;; The line runs from its start to the next line's, or to `to` for the last.
        (local.set $start (call $start_of (local.get $starts) (local.get $wide) (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (local.set $end
          (if (result i32) (i32.lt_u (local.get $i) (local.get $count))
            (then (call $start_of (local.get $starts) (local.get $wide) (local.get $i)))
            (else (local.get $to))))
        (call $copy
          (local.get $out)
          (i32.add (local.get $text) (i32.sub (local.get $start) (local.get $base)))
          (i32.sub (local.get $end) (local.get $start)))
        (local.set $out (i32.add (local.get $out) (i32.sub (local.get $end) (local.get $start))))
        (local.set $number (i32.add (local.get $number) (i32.const 1)))
        (br $line)))
    (local.get $out))

  ;; Writes the lines of runs of a document's lines from run `r`, line `line` on, each line as
  ;; `lines` writes it, while they fit before `limit`. The caller has copied into this memory:
  ;; the document's bytes from offset `base` on (at `text`), the start offsets of its lines
  ;; `l0` to `lmax` (at `starts`, u16 or u32 as for `lines`; `to` is where line `lmax` ends), the
  ;; prefix, and the `nruns` runs (at `runs`: pairs of i32, the first and last line of a run,
  ;; 0-based and inclusive, in ascending order, within `l0` to `lmax`). A line of more than
  ;; `maxline` bytes is not written. Returns where the output ends, and leaves at address 0 the
  ;; run and the line it stopped at and at address 8 why: 0 every line written, 1 a line longer
  ;; than `maxline` (the caller writes it its own way and goes on at the next), 2 no room for
  ;; the next line, which may take `plen` + max(`width`, 10) + 2 bytes besides its own. Up to 7
  ;; bytes past `limit` may be written.
  (func (export "runs")
    (param $text i32) (param $starts i32) (param $wide i32) (param $l0 i32) (param $lmax i32) (param $base i32) (param $to i32)
    (param $runs i32) (param $nruns i32) (param $r i32) (param $line i32)
    (param $prefix i32) (param $plen i32) (param $width i32) (param $sep i32) (param $maxline i32)
    (param $out i32) (param $limit i32)
    (result i32)
    (local $first i32) (local $last i32) (local $start i32) (local $end i32) (local $len i32)
    (local $why i32) (local $head i32)
    ;; The most a line's head (prefix, number, separator) and added newline take.
    (local.set $head
      (i32.add (i32.add (local.get $plen) (i32.const 2))
        (select (local.get $width) (i32.const 10) (i32.gt_s (local.get $width) (i32.const 10)))))
    (block $stop
      (loop $run
        (br_if $stop (i32.ge_u (local.get $r) (local.get $nruns)))
        (local.set $first (i32.load (i32.add (local.get $runs) (i32.shl (local.get $r) (i32.const 3)))))
        (local.set $last (i32.load (i32.add (local.get $runs) (i32.add (i32.shl (local.get $r) (i32.const 3)) (i32.const 4)))))
        (if (i32.lt_s (local.get $line) (local.get $first)) (then (local.set $line (local.get $first))))
        (block $run_done
          (loop $each
            (br_if $run_done (i32.gt_s (local.get $line) (local.get $last)))
            (local.set $start (call $start_of (local.get $starts) (local.get $wide) (i32.sub (local.get $line) (local.get $l0))))
            (local.set $end
              (if (result i32) (i32.lt_s (local.get $line) (local.get $lmax))
                (then (call $start_of (local.get $starts) (local.get $wide) (i32.sub (i32.add (local.get $line) (i32.const 1)) (local.get $l0))))
                (else (local.get $to))))
            (local.set $len (i32.sub (local.get $end) (local.get $start)))
            (if (i32.gt_u (local.get $len) (local.get $maxline))
              (then (local.set $why (i32.const 1)) (br $stop)))
            (if (i32.gt_u (i32.add (i32.add (local.get $out) (local.get $head)) (local.get $len)) (local.get $limit))
              (then (local.set $why (i32.const 2)) (br $stop)))
            (local.set $out (call $head (local.get $out) (local.get $prefix) (local.get $plen) (i32.add (local.get $line) (i32.const 1)) (local.get $width) (local.get $sep)))
            (call $copy (local.get $out) (i32.add (local.get $text) (i32.sub (local.get $start) (local.get $base))) (local.get $len))
            (local.set $out (i32.add (local.get $out) (local.get $len)))
            ;; The document's last line may have no newline: it gets one.
            (if (i32.or (i32.eqz (local.get $len)) (i32.ne (i32.load8_u (i32.sub (local.get $out) (i32.const 1))) (i32.const 0x0a)))
              (then
                (i32.store8 (local.get $out) (i32.const 0x0a))
                (local.set $out (i32.add (local.get $out) (i32.const 1)))))
            (local.set $line (i32.add (local.get $line) (i32.const 1)))
            (br $each)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $run)))
    (i32.store (i32.const 0) (local.get $r))
    (i32.store (i32.const 4) (local.get $line))
    (i32.store (i32.const 8) (local.get $why))
    (local.get $out))

  ;; Writes at `out` the prefix (`plen` bytes at `prefix`), then, when `width` >= 0, `number`
  ;; left-padded with spaces to `width` and the byte `sep`; returns where that ends.
  (func $head (param $out i32) (param $prefix i32) (param $plen i32) (param $number i32) (param $width i32) (param $sep i32) (result i32)
    (local $digits i32) (local $bound i32) (local $at i32) (local $n i32)
    (call $copy (local.get $out) (local.get $prefix) (local.get $plen))
    (local.set $out (i32.add (local.get $out) (local.get $plen)))
    (if (i32.ge_s (local.get $width) (i32.const 0))
      (then
        ;; The number's digits: 10 at most for a u32.
        (local.set $digits (i32.const 1))
        (local.set $bound (i32.const 10))
        (block $counted
          (loop $count_digits
            (br_if $counted (i32.lt_u (local.get $number) (local.get $bound)))
            (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
            (br_if $counted (i32.eq (local.get $digits) (i32.const 10)))
            (local.set $bound (i32.mul (local.get $bound) (i32.const 10)))
            (br $count_digits)))
        (local.set $n (i32.sub (local.get $width) (local.get $digits)))
        (block $padded
          (loop $pad
            (br_if $padded (i32.le_s (local.get $n) (i32.const 0)))
            (i32.store8 (local.get $out) (i32.const 0x20))
            (local.set $out (i32.add (local.get $out) (i32.const 1)))
            (local.set $n (i32.sub (local.get $n) (i32.const 1)))
            (br $pad)))
        ;; Digits from the last one back.
        (local.set $n (local.get $number))
        (local.set $at (i32.add (local.get $out) (local.get $digits)))
        (loop $digit
          (local.set $at (i32.sub (local.get $at) (i32.const 1)))
          (i32.store8 (local.get $at) (i32.add (i32.const 0x30) (i32.rem_u (local.get $n) (i32.const 10))))
          (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
          (br_if $digit (i32.gt_u (local.get $at) (local.get $out))))
        (local.set $out (i32.add (local.get $out) (local.get $digits)))
        (i32.store8 (local.get $out) (local.get $sep))
        (local.set $out (i32.add (local.get $out) (i32.const 1)))))
    (local.get $out))

;; Copies `n` bytes from `src` to `dst` (`dst` before `src` or apart from it), eight at a time:
  ;; it may write up to 7 bytes past `dst + n` (what follows is written next, or is not output)
  ;; and read up to 7 past `src + n`. Short copies are most of the copies here, and `memory.copy`
  ;; costs a call into the engine each.
  (func $copy (param $dst i32) (param $src i32) (param $n i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $dst) (local.get $n)))
    (block $done
      (loop $word
        (br_if $done (i32.ge_u (local.get $dst) (local.get $end)))
        (i64.store (local.get $dst) (i64.load (local.get $src)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 8)))
        (local.set $src (i32.add (local.get $src) (i32.const 8)))
        (br $word))))

  ;; Entry `i` of the line starts at `starts`: u16 when `wide` is 0, else u32.
  (func $start_of (param $starts i32) (param $wide i32) (param $i i32) (result i32)
    (if (result i32) (local.get $wide)
      (then (i32.load (i32.add (local.get $starts) (i32.shl (local.get $i) (i32.const 2)))))
      (else (i32.load16_u (i32.add (local.get $starts) (i32.shl (local.get $i) (i32.const 1))))))))
