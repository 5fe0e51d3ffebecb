"""How each program the terminal policy reads really parses its argv (Debian 12, bookworm).

``OPTION_TABLES`` maps a program name to its complete getopt table, for
:func:`deepseek_eyes.terminal.getopt.parse_argv`: the short optstring and every long option,
with the argument kind each takes, as the *installed* binary passes them to ``getopt_long``
(or ``getopt``, or ``argp_parse``). Hidden and undocumented options are in
(``sed -b``/``--binary``, wget's ``--proxy__compat``): getopt accepts them whatever ``--help``
says.
Nothing was guessed: each table was read out of the running program (its getopt_long call
intercepted at start-up), then checked against the upstream sources and ``--help``; the drift
test (tests/terminal/test_option_tables.py) re-checks the installed ``--help`` and glibc's own
list of long names (``PROG --=`` is an abbreviation of every long option, so getopt answers
"ambiguous" with all of them) on every run.

Versions read: coreutils 9.1, grep 3.8, sed 4.9, findutils 4.9.0 (xargs), tar 1.34,
gzip 1.12, xz-utils 5.4.1, diffutils 3.8, patch 2.7.6, file 5.44, util-linux 2.38.1
(column, hexdump, rev, ionice, taskset, chrt, flock, setsid; getopt(1) for lsb_release),
procps 4.0.2 (free, uptime), binutils 2.40 (strings), hostname 3.23, wget 1.21.3,
ncal 12.1.8 (cal), glibc 2.36 (locale), debianutils 5.7 (which), lsb-release 12.0.

Where the reader cannot hold the binary's table exactly, the table is the closest thing that
never reads *fewer* options than the program does:

* A leading ``-`` in the optstring (``sort``, ``join``, ``uniq``; tar's ``ARGP_IN_ORDER``)
  hands operands back in order instead of permuting them. Options after operands are still
  options either way, so it is dropped; what those programs then make of some operands is in
  ``QUIRKS``.
* Long names that themselves start with ``-`` are test hooks spelled ``---name``
  (``---presume-input-tty`` in diff, gzip/gunzip and rm; ``---presume-input-pipe`` in head and
  tail; ``---disable-inotify`` in tail; ``---debug`` in factor and numfmt;
  ``---io-blksize=`` in split). The reader refuses such names, so they are left out: using
  one is an unknown option, which fails closed.
* argp programs (tar, locale) get the options argp adds: ``-?``/``--help``, ``--usage``,
  ``--program-name=``, ``--HANG[=]`` and ``--version`` (argp's ``-V`` is shadowed by tar's own
  ``-V``, ``--label``).
* glibc takes an abbreviation that matches several long names as long as they are all the
  same option (grep's ``--col`` for ``--color``/``--colour``); the reader calls it ambiguous,
  which again fails closed.

These tables describe the programs in /usr/bin, not shell builtins of the same name (``echo``,
``printf``, ``test``, ``true``, ``false``, ``pwd``). Environment changes the reading too: with
``POSIXLY_CORRECT`` set, glibc stops at the first operand (later ``-x`` words become operands),
and ``_POSIX2_VERSION`` switches the obsolete forms of head, tail, sort and uniq.

``NOT_GETOPT`` holds the programs that do not read their argv with getopt at all, with one
line on how they do; the policy must treat them on their own terms. ``QUIRKS`` holds what a
program in ``OPTION_TABLES`` reads outside getopt (words before or after it, environment
variables that add options, operands that are really outputs or commands).
"""

from __future__ import annotations

from deepseek_eyes.terminal.policy.getopt import OptionTable

__all__ = ["NOT_GETOPT", "OPTION_TABLES", "QUIRKS"]

OPTION_TABLES: dict[str, OptionTable] = {
    "arch": OptionTable.of("", "help version"),
    "b2sum": OptionTable.of(
        "l:bctwz",
        (
            "length= check ignore-missing quiet status warn strict tag zero binary text help "
            "version"
        ),
    ),
    "base32": OptionTable.of("diw:", "decode wrap= ignore-garbage help version"),
    "base64": OptionTable.of("diw:", "decode wrap= ignore-garbage help version"),
    "basename": OptionTable.of("+as:z", "multiple suffix= zero help version"),
    "basenc": OptionTable.of(
        "diw:",
        (
            "decode wrap= ignore-garbage base64 base64url base32 base32hex base16 base2msbf "
            "base2lsbf z85 help version"
        ),
    ),
    # ncal's getopt(): short options only, permuted; no --help.
    "cal": OptionTable.of("31A:B:Cd:eH:hjJm:ops:wySMW:b", ""),
    "cat": OptionTable.of(
        "benstuvAET",
        (
            "number-nonblank number squeeze-blank show-nonprinting show-ends show-tabs "
            "show-all help version"
        ),
    ),
    "chgrp": OptionTable.of(
        "HLPRcfhv",
        (
            "recursive changes dereference no-dereference no-preserve-root preserve-root "
            "quiet silent reference= verbose help version"
        ),
    ),
    # The mode letters are options only so that a MODE like -w survives getopt (QUIRKS).
    "chmod": OptionTable.of(
        "Rcfvr::w::x::X::s::t::u::g::o::a::,::+::=::0::1::2::3::4::5::6::7::",
        (
            "changes recursive no-preserve-root preserve-root quiet reference= silent verbose "
            "help version"
        ),
    ),
    "chown": OptionTable.of(
        "HLPRcfhv",
        (
            "recursive changes dereference from= no-dereference no-preserve-root "
            "preserve-root quiet silent reference= verbose help version"
        ),
    ),
    "chrt": OptionTable.of(
        "+abdD:fiphmoP:T:rRvV",
        (
            "all-tasks batch deadline fifo idle pid help max other rr sched-runtime= "
            "sched-period= sched-deadline= reset-on-fork verbose version"
        ),
    ),
    "cksum": OptionTable.of(
        "a:l:bctwz",
        (
            "length= check ignore-missing quiet status warn strict tag zero algorithm= debug "
            "untagged help version"
        ),
    ),
    "cmp": OptionTable.of(
        "bci:ln:sv",
        "print-bytes print-chars ignore-initial= verbose bytes= silent quiet version help",
    ),
    "column": OptionTable.of(
        "c:dE:eH:hi:Jl:LN:n:O:o:p:R:r:s:T:tVW:x",
        (
            "columns= fillrows help json keep-empty-lines output-separator= output-width= "
            "separator= table table-columns= table-columns-limit= table-hide= table-name= "
            "table-noextreme= table-noheadings table-order= table-right= table-truncate= "
            "table-wrap= table-empty-lines table-header-repeat tree= tree-id= tree-parent= "
            "version"
        ),
    ),
    "comm": OptionTable.of(
        "123z",
        "check-order nocheck-order output-delimiter= total zero-terminated help version",
    ),
    "cp": OptionTable.of(
        "abdfHilLnprst:uvxPRS:TZ",
        (
            "archive attributes-only backup[=] copy-contents dereference force interactive "
            "link no-clobber no-dereference no-preserve= no-target-directory one-file-system "
            "parents path preserve[=] recursive remove-destination sparse= reflink[=] "
            "strip-trailing-slashes suffix= symbolic-link target-directory= update verbose "
            "context[=] help version"
        ),
    ),
    "csplit": OptionTable.of(
        "f:b:kn:sqz",
        (
            "digits= quiet silent keep-files elide-empty-files prefix= suffix-format= "
            "suppress-matched help version"
        ),
    ),
    "cut": OptionTable.of(
        "b:c:d:f:nsz",
        (
            "bytes= characters= fields= delimiter= only-delimited output-delimiter= "
            "complement zero-terminated help version"
        ),
    ),
    "date": OptionTable.of(
        "d:f:I::r:Rs:u",
        (
            "date= debug file= iso-8601[=] reference= resolution rfc-email rfc-822 rfc-2822 "
            "rfc-3339= set= uct utc universal help version"
        ),
    ),
    "df": OptionTable.of(
        "aB:iF:hHklmPTt:vx:",
        (
            "all block-size= inodes human-readable si local output[=] portability print-type "
            "sync no-sync total type= exclude-type= help version"
        ),
    ),
    "diff": OptionTable.of(
        "0123456789abBcC:dD:eEfF:hHiI:lL:nNpPqrsS:tTuU:vwW:x:X:yZ",
        (
            "binary brief changed-group-format= color[=] context[=] ed exclude= exclude-from= "
            "expand-tabs forward-ed from-file= help horizon-lines= ifdef= ignore-all-space "
            "ignore-blank-lines ignore-case ignore-file-name-case ignore-matching-lines= "
            "ignore-space-change ignore-tab-expansion ignore-trailing-space "
            "inhibit-hunk-merge initial-tab label= left-column line-format= minimal new-file "
            "new-group-format= new-line-format= no-dereference no-ignore-file-name-case "
            "normal old-group-format= old-line-format= paginate palette= rcs recursive "
            "report-identical-files sdiff-merge-assist show-c-function show-function-line= "
            "side-by-side speed-large-files starting-file= strip-trailing-cr "
            "suppress-blank-empty suppress-common-lines tabsize= text to-file= "
            "unchanged-group-format= unchanged-line-format= unidirectional-new-file "
            "unified[=] version width="
        ),
    ),
    "dirname": OptionTable.of("z", "zero help version"),
    "du": OptionTable.of(
        "0abd:chHklmst:xB:DLPSX:",
        (
            "all apparent-size block-size= bytes count-links dereference dereference-args "
            "exclude= exclude-from= files0-from= human-readable inodes si max-depth= null "
            "no-dereference one-file-system separate-dirs summarize total threshold= time[=] "
            "time-style= help version"
        ),
    ),
    # The whitespace letters let a shebang's "-S ..." through (coreutils C_ISSPACE_CHARS).
    "env": OptionTable.of(
        "+C:iS:u:v0 \t\n\v\f\r",
        (
            "ignore-environment null unset= chdir= default-signal[=] ignore-signal[=] "
            "block-signal[=] list-signal-handling debug split-string= help version"
        ),
    ),
    "expand": OptionTable.of("it:0::1::2::3::4::5::6::7::8::9::", "tabs= initial help version"),
    "factor": OptionTable.of("", "help version"),
    "file": OptionTable.of(
        "bcCde:Ef:F:hiklLm:nNpP:rsSvzZ0",
        (
            "help version magic-file= uncompress uncompress-noreport brief checking-printout "
            "exclude= exclude-quiet= files-from= separator= mime apple extension mime-type "
            "mime-encoding keep-going list dereference no-dereference no-buffer no-pad print0 "
            "preserve-date parameter= raw special-files no-sandbox compile debug"
        ),
    ),
    "flock": OptionTable.of(
        "+sexnoFuw:E:hV?",
        (
            "shared exclusive unlock nonblocking nb timeout= wait= conflict-exit-code= close "
            "no-fork verbose help version"
        ),
    ),
    "fmt": OptionTable.of(
        "0123456789cstuw:p:g:",
        (
            "crown-margin prefix= split-only tagged-paragraph uniform-spacing width= goal= "
            "help version"
        ),
    ),
    "fold": OptionTable.of(
        "bsw:0::1::2::3::4::5::6::7::8::9::",
        "bytes spaces width= help version",
    ),
    "free": OptionTable.of(
        "bkmghltvc:ws:V",
        (
            "bytes kilo mega giga tera peta kibi mebi gibi tebi pebi human si lohi total "
            "committed seconds= count= wide help version"
        ),
    ),
    "grep": OptionTable.of(
        "0123456789A:B:C:D:EFGHIPTUVX:abcd:e:f:hiLlm:noqRrsuvwxyZz",
        (
            "basic-regexp extended-regexp fixed-regexp fixed-strings perl-regexp "
            "after-context= before-context= binary-files= byte-offset context= color[=] "
            "colour[=] count devices= directories= exclude= exclude-from= exclude-dir= file= "
            "files-with-matches files-without-match group-separator= help include= "
            "ignore-case no-ignore-case initial-tab label= line-buffered line-number "
            "line-regexp max-count= no-filename no-group-separator no-messages null null-data "
            "only-matching quiet recursive dereference-recursive regexp= invert-match silent "
            "text binary unix-byte-offsets version with-filename word-regexp"
        ),
    ),
    "groups": OptionTable.of("", "help version"),
    # A sh script that execs gzip -d "$@": gzip's table.
    "gunzip": OptionTable.of(
        "ab:cdfhH?klLmMnNqrS:tvVZ123456789",
        (
            "ascii to-stdout stdout decompress uncompress force help keep list license "
            "no-name name quiet silent synchronous recursive suffix= test verbose version "
            "fast best lzw bits= rsyncable"
        ),
    ),
    "gzip": OptionTable.of(
        "ab:cdfhH?klLmMnNqrS:tvVZ123456789",
        (
            "ascii to-stdout stdout decompress uncompress force help keep list license "
            "no-name name quiet silent synchronous recursive suffix= test verbose version "
            "fast best lzw bits= rsyncable"
        ),
    ),
    "head": OptionTable.of(
        "c:n:qvz0123456789",
        "bytes= lines= quiet silent verbose zero-terminated help version",
    ),
    "hexdump": OptionTable.of(
        "bcCde:f:L::n:os:vxhV",
        (
            "one-byte-octal one-byte-char canonical two-bytes-decimal two-bytes-octal "
            "two-bytes-hex format= format-file= color[=] length= skip= no-squeezing help "
            "version"
        ),
    ),
    "hostname": OptionTable.of(
        "aAdfbF:h?iIsVy",
        (
            "domain boot file= fqdn all-fqdns help long short version alias ip-address "
            "all-ip-addresses nis yp"
        ),
    ),
    "id": OptionTable.of("agnruzGZ", "context group groups name real user zero help version"),
    "install": OptionTable.of(
        "bcCsDdg:m:o:pt:TvS:Z",
        (
            "backup[=] compare context[=] directory group= mode= no-target-directory owner= "
            "preserve-timestamps preserve-context strip strip-program= suffix= "
            "target-directory= verbose help version"
        ),
    ),
    "ionice": OptionTable.of(
        "+n:c:p:P:u:tVh",
        "classdata= class= help ignore pid= pgid= uid= version",
    ),
    # The binary's optstring starts with '-' (operands in order); dropped, see the docstring.
    "join": OptionTable.of(
        "a:e:i1:2:j:o:t:v:z",
        "ignore-case check-order nocheck-order zero-terminated header help version",
    ),
    "ln": OptionTable.of(
        "bdfinrst:vFLPS:T",
        (
            "backup[=] directory no-dereference no-target-directory force interactive suffix= "
            "target-directory= logical physical relative symbolic verbose help version"
        ),
    ),
    # glibc argp: locale's options, then argp's own.
    "locale": OptionTable.of(
        "amckv?V",
        (
            "all-locales charmaps category-name keyword-name verbose help usage program-name= "
            "HANG[=] version"
        ),
    ),
    "ls": OptionTable.of(
        "abcdfghiklmnopqrstuvw:xABCDFGHI:LNQRST:UXZ1",
        (
            "all escape directory dired full-time group-directories-first human-readable "
            "inode kibibytes numeric-uid-gid no-group hide-control-chars reverse size width= "
            "almost-all ignore-backups classify[=] file-type si dereference-command-line "
            "dereference-command-line-symlink-to-dir hide= ignore= indicator-style= "
            "dereference literal quote-name quoting-style= recursive format= "
            "show-control-chars sort= tabsize= time= time-style= zero color[=] hyperlink[=] "
            "block-size= context author help version"
        ),
    ),
    # A sh script: getopt(1) -o hvidrcas -l help,version,id,description,release,...
    "lsb_release": OptionTable.of(
        "hvidrcas",
        "help version id description release codename all short",
    ),
    "md5sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "mkdir": OptionTable.of("pm:vZ", "context[=] mode= parents verbose help version"),
    "mkfifo": OptionTable.of("m:Z", "context[=] mode= help version"),
    "mktemp": OptionTable.of("dp:qtuV", "directory quiet dry-run suffix= tmpdir[=] help version"),
    "mv": OptionTable.of(
        "bfint:uvS:TZ",
        (
            "backup[=] context force interactive no-clobber no-target-directory "
            "strip-trailing-slashes suffix= target-directory= update verbose help version"
        ),
    ),
    "nice": OptionTable.of("+n:", "adjustment= help version"),
    "nl": OptionTable.of(
        "h:b:f:v:i:pl:s:w:n:d:",
        (
            "header-numbering= body-numbering= footer-numbering= starting-line-number= "
            "line-increment= no-renumber join-blank-lines= number-separator= number-width= "
            "number-format= section-delimiter= help version"
        ),
    ),
    "nohup": OptionTable.of("+", "help version"),
    "nproc": OptionTable.of("", "all ignore= help version"),
    "numfmt": OptionTable.of(
        "d:z",
        (
            "from= from-unit= to= to-unit= round= padding= suffix= grouping delimiter= field= "
            "debug header[=] format= invalid= zero-terminated help version"
        ),
    ),
    "od": OptionTable.of(
        "A:aBbcDdeFfHhIij:LlN:OoS:st:vw::Xx",
        (
            "skip-bytes= address-radix= read-bytes= format= output-duplicates strings[=] "
            "traditional width[=] endian= help version"
        ),
    ),
    "paste": OptionTable.of("d:sz", "serial delimiters= zero-terminated help version"),
    "patch": OptionTable.of(
        "bB:cd:D:eEfF:g:i:lmnNo:p:r:RstTuvV:x:Y:z:Z",
        (
            "backup prefix= context directory= ifdef= ed remove-empty-files force fuzz= get= "
            "input= ignore-whitespace merge[=] normal forward output= strip= reject-file= "
            "reverse quiet silent batch set-time unified version version-control= debug= "
            "basename-prefix= suffix= set-utc dry-run verbose binary help backup-if-mismatch "
            "no-backup-if-mismatch posix quoting-style= reject-format= read-only= "
            "follow-symlinks"
        ),
    ),
    "printenv": OptionTable.of("+iu:0", "null help version"),
    "pwd": OptionTable.of("LP", "logical physical help version"),
    "readlink": OptionTable.of(
        "efmnqsvz",
        (
            "canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent "
            "verbose zero help version"
        ),
    ),
    "realpath": OptionTable.of(
        "eLmPqsz",
        (
            "canonicalize-existing canonicalize-missing relative-to= relative-base= quiet "
            "strip no-symlinks zero logical physical help version"
        ),
    ),
    "rev": OptionTable.of("Vh", "version help"),
    "rm": OptionTable.of(
        "dfirvIR",
        (
            "force interactive[=] one-file-system no-preserve-root preserve-root[=] recursive "
            "dir verbose help version"
        ),
    ),
    "rmdir": OptionTable.of("pv", "ignore-fail-on-non-empty path parents verbose help version"),
    "sed": OptionTable.of(
        "bsnrzuEe:f:l:i::V:",
        (
            "binary regexp-extended debug expression= file= in-place[=] line-length= "
            "null-data zero-terminated quiet posix silent sandbox separate unbuffered version "
            "help follow-symlinks"
        ),
    ),
    "seq": OptionTable.of("+f:s:w", "equal-width format= separator= help version"),
    "setsid": OptionTable.of("+Vhcfw", "ctty fork wait version help"),
    "sha1sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "sha224sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "sha256sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "sha384sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "sha512sum": OptionTable.of(
        "bctwz",
        "check ignore-missing quiet status warn strict tag zero binary text help version",
    ),
    "shred": OptionTable.of(
        "fn:s:uvxz",
        "exact force iterations= size= random-source= remove[=] verbose zero help version",
    ),
    "shuf": OptionTable.of(
        "ei:n:o:rz",
        (
            "echo input-range= head-count= output= random-source= repeat zero-terminated help "
            "version"
        ),
    ),
    "sleep": OptionTable.of("", "help version"),
    # The binary's optstring starts with '-' (operands in order); dropped, see the docstring.
    "sort": OptionTable.of(
        "bcCdfghik:mMno:rRsS:t:T:uVy:z",
        (
            "ignore-leading-blanks check[=] compress-program= debug dictionary-order "
            "ignore-case files0-from= general-numeric-sort ignore-nonprinting key= merge "
            "month-sort numeric-sort human-numeric-sort version-sort random-sort "
            "random-source= sort= output= reverse stable batch-size= buffer-size= "
            "field-separator= temporary-directory= unique zero-terminated parallel= help "
            "version"
        ),
    ),
    "split": OptionTable.of(
        "0123456789C:a:b:del:n:t:ux",
        (
            "bytes= lines= line-bytes= number= elide-empty-files unbuffered suffix-length= "
            "additional-suffix= numeric-suffixes[=] hex-suffixes[=] filter= verbose "
            "separator= help version"
        ),
    ),
    "stat": OptionTable.of(
        "c:fLt",
        "dereference file-system format= printf= terse cached= help version",
    ),
    "stdbuf": OptionTable.of("+i:o:e:", "input= output= error= help version"),
    "strings": OptionTable.of(
        "adfhHn:wot:e:T:s:U:Vv0123456789",
        (
            "all bytes= data encoding= help include-all-whitespace output-separator= "
            "print-file-name radix= target= unicode= version"
        ),
    ),
    "sum": OptionTable.of("rs", "sysv help version"),
    "tac": OptionTable.of("brs:", "before regex separator= help version"),
    "tail": OptionTable.of(
        "c:n:fFqs:vz0123456789",
        (
            "bytes= follow[=] lines= max-unchanged-stats= pid= quiet retry silent "
            "sleep-interval= verbose zero-terminated help version"
        ),
    ),
    # argp (ARGP_IN_ORDER) converted to getopt: tar's options, its name-selection child's,
    # then argp's own (-?, --help, --usage, --program-name=, --HANG[=], --version).
    "tar": OptionTable.of(
        "txcdruASGg:nWkUOmpsf:0123456789ML:F:b:iBH:V:aI:jzZJPhK:N:lRwvoC:T:X:?",
        (
            "list extract get create diff compare append update catenate concatenate delete "
            "test-label sparse hole-detection= sparse-version= incremental "
            "listed-incremental= level= ignore-failed-read occurrence[=] seek no-seek "
            "no-check-device check-device verify remove-files keep-old-files skip-old-files "
            "keep-newer-files overwrite unlink-first recursive-unlink no-overwrite-dir "
            "overwrite-dir keep-directory-symlink one-top-level[=] to-stdout to-command= "
            "ignore-command-error no-ignore-command-error owner= group= owner-map= group-map= "
            "mtime= clamp-mtime mode= atime-preserve[=] touch same-owner no-same-owner "
            "numeric-owner preserve-permissions same-permissions no-same-permissions "
            "preserve-order same-order delay-directory-restore no-delay-directory-restore "
            "sort= xattrs no-xattrs xattrs-include= xattrs-exclude= selinux no-selinux acls "
            "no-acls file= force-local rmt-command= rsh-command= multi-volume tape-length= "
            "info-script= new-volume-script= volno-file= blocking-factor= record-size= "
            "ignore-zeros read-full-records format= old-archive portability posix pax-option= "
            "label= auto-compress no-auto-compress use-compress-program= bzip2 gzip gunzip "
            "ungzip compress uncompress lzip lzma lzop xz zstd one-file-system absolute-names "
            "dereference hard-dereference starting-file= newer= after-date= newer-mtime= "
            "backup[=] suffix= strip-components= transform= xform= checkpoint[=] "
            "checkpoint-action= check-links totals[=] utc full-time index-file= block-number "
            "show-defaults show-snapshot-field-ranges show-omitted-dirs "
            "show-transformed-names show-stored-names quoting-style= quote-chars= "
            "no-quote-chars= interactive confirmation verbose warning= restrict add-file= "
            "directory= files-from= null no-null unquote no-unquote verbatim-files-from "
            "no-verbatim-files-from exclude= exclude-from= exclude-caches "
            "exclude-caches-under exclude-caches-all exclude-tag= exclude-ignore= "
            "exclude-ignore-recursive= exclude-tag-under= exclude-tag-all= exclude-vcs "
            "exclude-vcs-ignores exclude-backups recursion no-recursion anchored no-anchored "
            "ignore-case no-ignore-case wildcards no-wildcards wildcards-match-slash "
            "no-wildcards-match-slash help usage program-name= HANG[=] version"
        ),
    ),
    "taskset": OptionTable.of("+apchV", "all-tasks pid cpu-list help version"),
    "tee": OptionTable.of("aip", "append ignore-interrupts output-error[=] help version"),
    "timeout": OptionTable.of(
        "+k:s:v",
        "kill-after= signal= verbose foreground preserve-status help version",
    ),
    "touch": OptionTable.of(
        "acd:fhmr:t:",
        "time= no-create date= reference= no-dereference help version",
    ),
    "tr": OptionTable.of("+AcCdst", "complement delete squeeze-repeats truncate-set1 help version"),
    "truncate": OptionTable.of("cor:s:", "no-create io-blocks reference= size= help version"),
    "tty": OptionTable.of("s", "silent quiet help version"),
    "uname": OptionTable.of(
        "asnrvmpio",
        (
            "all kernel-name sysname nodename kernel-release release kernel-version machine "
            "processor hardware-platform operating-system help version"
        ),
    ),
    "unexpand": OptionTable.of(",0123456789at:", "tabs= all first-only help version"),
    # The binary's optstring starts with '-' (operands in order); dropped, see the docstring.
    "uniq": OptionTable.of(
        "0123456789Dcdf:is:uw:z",
        (
            "count repeated all-repeated[=] group[=] ignore-case unique skip-fields= "
            "skip-chars= check-chars= zero-terminated help version"
        ),
    ),
    "unlink": OptionTable.of("", "help version"),
    "uptime": OptionTable.of("phsV", "pretty help since version"),
    "wc": OptionTable.of(
        "clLmw",
        "bytes chars lines words debug files0-from= max-line-length help version",
    ),
    # wget builds this table from its settings: every on/off switch takes an optional
    # value (--recursive=off) and has a --no- twin; -n takes letters (-nv, -nc, -nd).
    "wget": OptionTable.of(
        "A:Ea:bKB:ckdP:D:X:e:xFhEI:46i:l:mn:O:o:pY:qQ:rR:LSHT:Nt:U:vVw:",
        (
            "accept= accept-regex= adjust-extension[=] no-adjust-extension append-output= "
            "ask-password[=] no-ask-password auth-no-challenge[=] no-auth-no-challenge "
            "background[=] no-background backup-converted[=] no-backup-converted backups[=] "
            "no-backups base= bind-address= body-data= body-file= ca-certificate= "
            "ca-directory= cache[=] no-cache certificate= certificate-type= "
            "check-certificate[=] no-check-certificate clobber[=] compression= config= "
            "connect-timeout= continue[=] no-continue convert-file-only[=] "
            "no-convert-file-only convert-links[=] no-convert-links content-disposition[=] "
            "no-content-disposition content-on-error[=] no-content-on-error cookies[=] "
            "no-cookies crl-file= cut-dirs= debug[=] no-debug default-page= delete-after[=] "
            "no-delete-after directories[=] no-directories directory-prefix= dns-cache[=] "
            "no-dns-cache dns-timeout= domains= dont-remove-listing dot-style= egd-file= "
            "exclude-directories= exclude-domains= execute= follow-ftp[=] no-follow-ftp "
            "follow-tags= force-directories[=] no-force-directories force-html[=] "
            "no-force-html ftp-password= ftp-user= ftps-clear-data-connection[=] "
            "no-ftps-clear-data-connection ftps-fallback-to-ftp[=] no-ftps-fallback-to-ftp "
            "ftps-implicit[=] no-ftps-implicit ftps-resume-ssl[=] no-ftps-resume-ssl glob[=] "
            "no-glob header= help host-directories[=] no-host-directories hsts[=] no-hsts "
            "hsts-file= html-extension[=] no-html-extension htmlify[=] no-htmlify "
            "http-keep-alive[=] no-http-keep-alive http-passwd= http-password= http-user= "
            "https-only[=] no-https-only ignore-case[=] no-ignore-case ignore-length[=] "
            "no-ignore-length ignore-tags= include-directories= inet4-only[=] no-inet4-only "
            "inet6-only[=] no-inet6-only input-file= iri[=] no-iri keep-badhash[=] "
            "no-keep-badhash keep-session-cookies[=] no-keep-session-cookies level= "
            "limit-rate= load-cookies= local-encoding= rejected-log= max-redirect= method= "
            "mirror[=] no-mirror netrc[=] no-netrc no= no-clobber[=] no-no-clobber "
            "no-config[=] no-no-config no-parent[=] no-no-parent output-document= "
            "output-file= page-requisites[=] no-page-requisites parent[=] passive-ftp[=] "
            "no-passive-ftp password= pinnedpubkey= post-data= post-file= prefer-family= "
            "preserve-permissions[=] no-preserve-permissions ciphers= private-key= "
            "private-key-type= progress= show-progress[=] no-show-progress "
            "protocol-directories[=] no-protocol-directories proxy[=] no-proxy proxy__compat= "
            "proxy-passwd= proxy-password= proxy-user= quiet[=] no-quiet quota= random-file= "
            "random-wait[=] no-random-wait read-timeout= recursive[=] no-recursive referer= "
            "regex-type= reject= reject-regex= relative[=] no-relative remote-encoding= "
            "remove-listing[=] no-remove-listing report-speed[=] no-report-speed "
            "restrict-file-names[=] no-restrict-file-names retr-symlinks[=] no-retr-symlinks "
            "retry-connrefused[=] no-retry-connrefused retry-on-host-error[=] "
            "no-retry-on-host-error retry-on-http-error= save-cookies= save-headers[=] "
            "no-save-headers secure-protocol= server-response[=] no-server-response "
            "span-hosts[=] no-span-hosts spider[=] no-spider start-pos= strict-comments[=] "
            "no-strict-comments timeout= timestamping[=] no-timestamping if-modified-since[=] "
            "no-if-modified-since tries= unlink[=] no-unlink trust-server-names[=] "
            "no-trust-server-names use-askpass= use-server-timestamps[=] "
            "no-use-server-timestamps user= user-agent= verbose[=] no-verbose version wait= "
            "waitretry= warc-cdx[=] no-warc-cdx warc-compression[=] no-warc-compression "
            "warc-dedup= warc-digests[=] no-warc-digests warc-file= warc-header= "
            "warc-keep-log[=] no-warc-keep-log warc-max-size= warc-tempdir= xattr[=] no-xattr"
        ),
    ),
    # debianutils which is a sh script: getopts "a" (no permutation, no long options).
    "which": OptionTable.of("+a", ""),
    "whoami": OptionTable.of("", "help version"),
    "xargs": OptionTable.of(
        "+0a:E:e::i::I:l::L:n:oprs:txP:d:",
        (
            "null arg-file= delimiter= eof[=] replace[=] max-lines[=] max-args= open-tty "
            "interactive no-run-if-empty max-chars= verbose show-limits exit max-procs= "
            "process-slot-var= version help"
        ),
    ),
    "xz": OptionTable.of(
        "cC:defF:hHlkM:qQrS:tT:vVz0123456789",
        (
            "compress decompress uncompress test list keep force stdout to-stdout "
            "single-stream no-sparse suffix= files[=] files0[=] format= check= ignore-check "
            "block-size= block-list= memlimit-compress= memlimit-decompress= "
            "memlimit-mt-decompress= memlimit= memory= no-adjust threads= flush-timeout= "
            "extreme fast best lzma1[=] lzma2[=] x86[=] powerpc[=] ia64[=] arm[=] armthumb[=] "
            "arm64[=] sparc[=] delta[=] quiet verbose no-warn robot info-memory help "
            "long-help version"
        ),
    ),
    "yes": OptionTable.of("", "help version"),
}

NOT_GETOPT: dict[str, str] = {
    "bzip2": (
        "bzip2 1.0.8 scans every word itself, options anywhere until '--': '-' and letters is a "
        "bundle of flags, none takes a value (c d z k f t s q v L V h, 1-9); '--name' must be "
        "spelled in full (--stdout --decompress --compress --keep --force --test --small "
        "--quiet --verbose --license --version --help --fast --best --exponential "
        "--repetitive-fast --repetitive-best); the BZIP2 and BZIP variables add options"
    ),
    "curl": (
        "curl 7.88.1 scans argv itself: short options bundle and take a value from the rest of "
        "the word or the next word (-ofile, -o file); a long option takes its value from the "
        "next word only (--output=file is unknown), may be any unique prefix, and a boolean "
        "one also as --no-NAME; options and URLs mix, '--' ends options, -:/--next starts a new "
        "URL group; -K/--config FILE and ~/.curlrc (unless -q comes first) add options"
    ),
    "echo": (
        "coreutils echo: no getopt; leading words made only of -n, -e, -E letters are options, "
        "every other word ('--' too) is printed; --help/--version only as the sole argument "
        "and without POSIXLY_CORRECT"
    ),
    "expr": (
        "coreutils expr: no getopt; --help/--version only as the sole argument, a first word "
        "'--' is dropped, every other word is part of the expression ('-5' is a number)"
    ),
    "false": "coreutils false: --help/--version only as the sole argument; all else is ignored",
    "getconf": (
        "glibc 2.36 getconf reads argv by position: [-v SPEC] VAR [PATH], -a [PATH], --help, "
        "--version; no bundles, no abbreviations"
    ),
    "jq": (
        "jq 1.6 scans argv itself, options anywhere: short flags bundle (-nr), long options are "
        "exact (no abbreviations) and there is no '--'; values come as following words "
        "(--arg NAME VALUE, --argjson NAME JSON, --slurpfile NAME FILE, --rawfile NAME FILE, "
        "--argfile NAME FILE, --indent N, -L DIR or -LDIR); the first other word is the "
        "filter, or with the -f/--from-file flag the FILE holding it; after --args/--jsonargs "
        "the remaining words are values, not files; ~/.jq is loaded as a module if present"
    ),
    "printf": (
        "coreutils printf: no getopt; --help/--version only as the sole argument, a first word "
        "'--' is dropped, then the first word is the FORMAT and the rest its arguments"
    ),
    "rg": (
        "ripgrep 13.0.0 parses with clap 2: short flags bundle, a value is attached (-epat, "
        "-e=pat) or the next word, long options are '--name value' or '--name=value' spelled "
        "in full, options anywhere, '--' ends options; the file in RIPGREP_CONFIG_PATH adds "
        "options first unless --no-config"
    ),
    "rsync": (
        "rsync 3.5.0 parses with popt: short flags bundle, a value is attached or the next "
        "word, long options are '--name=value' or '--name value' spelled in full (many also as "
        "--no-NAME), options anywhere, '--' ends options; HOST:PATH and rsync:// operands start "
        "a remote rsync whose own argv the remote side parses (-M/--remote-option adds to it)"
    ),
    "test": (
        "coreutils test and '[': no options, the whole argv is the expression; '[' alone "
        "takes --help/--version as its sole argument"
    ),
    "tree": (
        "tree 2.1.0 scans argv itself: a '-' word is a bundle of letters and each letter that "
        "needs a value (-L -P -I -o -H -T) takes the next word, never an attached one; long "
        "options are '--name', '--name=value' or '--name value', spelled in full; options and "
        "directories mix, '--' ends options"
    ),
    "true": "coreutils true: --help/--version only as the sole argument; all else is ignored",
    "unzip": (
        "UnZip 6.00 scans argv itself: option bundles come before the archive ('-' inside a "
        "bundle negates the next letter, as in --q); after the archive come member names, "
        "then '-x' (names to exclude) and '-d DIR' may follow; the UNZIP and UNZIPOPT "
        "variables add options; with -Z (or named zipinfo) it takes zipinfo's options"
    ),
    "xxd": (
        "xxd (vim 9.0) reads one option per word until the first operand or '--', no bundles; "
        "a word matches an option by prefix (-p, -ps, -postscript, -plain); values attached "
        "or next (-c8, -c 8; -g -l -n -o -s); the first operand is read, a second operand is "
        "the OUTPUT file, truncated (with -r patched in place)"
    ),
    "zip": (
        "Zip 3.0 scans argv itself: short options bundle, some take a value attached or next "
        "(-b -n -t -tt -O -P -TT -Z -s ...), long options may be any unique prefix; options "
        "and names mix; -i and -x take the following words as patterns up to the next option "
        "(@FILE reads them from FILE), -@ reads names from stdin; ZIPOPT adds options"
    ),
    "zstd": (
        "zstd 1.5.4 scans argv itself, options anywhere until '--': letters bundle and some "
        "take a number glued on (-19 -T4 -B# -M# -b# -e# -i#), -o FILE and -D FILE take the "
        "next word; long options are exact, some with '=value' (--fast[=#], --long[=#], "
        "--patch-from=REF, --format=, --memory=), some with the next word (--filelist FILE, "
        "--output-dir-flat DIR, --output-dir-mirror DIR, --trace LOG); ZSTD_CLEVEL and "
        "ZSTD_NBTHREADS add settings; named unzstd, zstdcat or zstdmt it changes mode"
    ),
}

QUIRKS: dict[str, str] = {
    "chmod": (
        "the mode letters (r w x X s t u g o a , + = 0-7) are in the optstring only so that a "
        "MODE beginning with '-' survives getopt: '-w' or '-rwx' is chmod's MODE operand"
    ),
    "date": "an operand without a leading '+' sets the system clock, like -s",
    "env": (
        "-S/--split-string VALUE is split into words that take its place (options, NAME=VALUE "
        "and the command); a lone '-' before the command means -i; the optstring holds the "
        "whitespace letters so that a shebang's '-S ...' survives; the command is run"
    ),
    "flock": (
        "'flock [opts] FILE -c|--command STRING' runs STRING with $SHELL -c; the -c is read "
        "after the lock FILE, outside getopt; otherwise 'FILE COMMAND [ARG]...' or a file "
        "descriptor number; FILE is created if missing"
    ),
    "gunzip": (
        "a shell script: --help/--version as its first word, else 'exec gzip -d \"$@\"'; "
        "GZIP in the environment adds options (obsolescent)"
    ),
    "gzip": "GZIP in the environment adds options (obsolescent, with a warning)",
    "head": (
        "if the first word is '-' and digits and then only letters of bcklmqvz, it is the "
        "obsolete count (head -5c FILE: 5 bytes of FILE) and is read before getopt; getopt "
        "would read it as -5 and a -c that swallows FILE"
    ),
    "hostname": (
        "an operand NAME sets the host name (-F FILE reads it from FILE); named domainname, "
        "nisdomainname, ypdomainname or dnsdomainname it acts on those instead"
    ),
    "join": (
        "operands come back in order; with more than two operands, a word after -j1, -j2 or "
        "-o LIST may be taken as that option's value (the obsolete forms)"
    ),
    "lsb_release": "a shell script; getopt(1) reads its argv with this table (permuting)",
    "nice": (
        "words -NUM, --NUM and -+NUM before the command are adjustments, read outside getopt "
        "(getopt would call them unknown options)"
    ),
    "nohup": "writes nohup.out (here or in $HOME) when standard output is a terminal",
    "seq": (
        "a word '-' followed by a digit or '.' is a (negative) number: it ends the options "
        "and is an operand"
    ),
    "sort": (
        "operands come back in order; '+POS1 [-POS2]' is the obsolete key form (the -POS2 word "
        "is taken by sort, the reader sees an unknown option)"
    ),
    "strings": (
        "a word '@FILE' is replaced by the words read from FILE before getopt (response file)"
    ),
    "tail": (
        "with one word of options and at most one file, a first word '[-+]NUM[bcl][f]' "
        "(tail -5c FILE, tail +3 FILE) is the obsolete count, read before getopt; getopt "
        "would read -5c as -5 and a -c that swallows FILE"
    ),
    "tar": (
        "if the first word does not start with '-', it is an old-style bundle: each letter is "
        "an option and each that takes a value takes the next unused word, in order (tar "
        "cfT out.tar list = tar -c -f out.tar -T list); TAR_OPTIONS in the environment adds "
        "options first; an archive named HOST:PATH is opened on HOST through rsh unless "
        "--force-local; -C, -T, --exclude and the like apply to the names after them"
    ),
    "uniq": (
        "operands come back in order: '+N' is the obsolete skip-chars form; the second operand "
        "is the OUTPUT file"
    ),
    "wget": (
        "reads /etc/wgetrc and ~/.wgetrc (or $WGETRC, or --config FILE) first; -e CMD runs a "
        "wgetrc command; every on/off switch also takes =on/=off; -n takes letters "
        "(-nv, -nc, -nd, -nH, -np)"
    ),
    "which": "a POSIX sh script: getopts, so no permutation, only -a, and no --help",
    "xz": "XZ_DEFAULTS and XZ_OPT in the environment add options",
}
