#!/usr/bin/env python3
"""Docs that cannot rot: checks README.md and the manual in docs/ against the real tickd.

  docs_test.py snippets --tickd PATH --root SRC   job files and shown commands
  docs_test.py links --root SRC                   relative links and their #anchors
  docs_test.py man --tickd PATH --root SRC --man-dir DIR   the man pages

What `snippets` checks, block by block (fenced code blocks of README.md and docs/**.md):

* A ```yaml block is a whole job file: `tickd validate -c` must accept it (exit 0).
  A marker on the line before the fence (an HTML comment, invisible on GitHub), written
  `<!-- docs-test: WORDS[: why] -->`, changes that:
    <!-- docs-test: invalid -->    the file must be refused with exit status 2
    <!-- docs-test: partial -->    part of a job file that validates once completed:
                                   job entries (`  - name: …`) get a `jobs:` line above,
                                   a file without `jobs:` gets one trivial job below
    <!-- docs-test: fragment -->   not checked (it names files that exist only on a
                                   real host, a plugin, a password file, …)
  A `${VAR}` without a default is set (to a placeholder) while the file is validated.
    <!-- docs-test: file=NAME -->  also saved as NAME in the page's scratch folder, for
                                   the page's `run` blocks (combines with the others)
* A block with a command line starting `$ tickd` must be marked:
    <!-- docs-test: run -->        every `$ ` line runs (bash, in the page's scratch
                                   folder, `tickd` on PATH, TZ=UTC); the lines below it,
                                   up to the next `$ `, are its stdout and stderr. A last
                                   line `[exit N]` is the expected exit status (else 0);
                                   a trailing comment of two spaces or more then `# ` is
                                   the writer's and is not compared
    <!-- docs-test: skip: why -->  shown, not run (its output needs a live store or the
                                   current time); say why after the colon

`links` checks every relative Markdown link `[text](path#anchor)` outside code: the path
exists (from the linking file's folder) and, for a .md target, the anchor is one of its
headings as GitHub spells them. It also checks that README.md links every guide in docs/.

`man` checks that tickd(1) names every subcommand and option `tickd --help` and
`tickd SUB --help` list, that tickd.yaml(5) names every key the job-file loader accepts
(the k…Keys tables of config/config.cc), and that the built pages in DIR render with
`man -l` (NAME, SYNOPSIS or DESCRIPTION, no warnings).

Exit 0 when everything holds; otherwise 1, with one line per failure naming FILE:LINE.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r'^<!--\s*docs-test:\s*(.*?)\s*-->\s*$')
FENCE = re.compile(r'^(\s*)(```+|~~~+)\s*([\w+-]*)')


class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        # A marker is `WORDS[: why]`: the words say what to check, the rest is for readers.
        words = marker.partition(': ')[0].split() if marker else []
        self.flags = {w for w in words if '=' not in w}
        self.options = dict(w.split('=', 1) for w in words if '=' in w)

    def where(self):
        return f'{self.path}:{self.line}'


def pages(root):
    """README.md and every Markdown file under docs/, in a stable order."""
    out = [root / 'README.md']
    out += sorted((root / 'docs').rglob('*.md'))
    return out


def blocks(path, root):
    """The fenced code blocks of one page, with the marker on the line before each."""
    lines = path.read_text(encoding='utf-8').split('\n')
    rel = path.relative_to(root)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        mm = MARKER.match(lines[prev].strip()) if prev >= 0 else None
        indent = len(m.group(1))
        body = '\n'.join(l[indent:] if l[:indent].isspace() else l for l in lines[start + 1:j])
        yield Block(rel, start + 1, lang, body + '\n', mm.group(1) if mm else None)
        i = j + 1


def completed(text):
    """A partial job file made whole: `jobs:` above bare entries, a job below a file without."""
    first = next((l for l in text.split('\n') if l.strip() and not l.lstrip().startswith('#')), '')
    if first.lstrip().startswith('- ') and first.startswith(' '):
        return 'jobs:\n' + text
    if not re.search(r'^jobs:', text, re.M):
        return text + 'jobs:\n  - name: docs-test-job\n    schedule: "0 * * * *"\n    shell: "true"\n'
    return text


def run(cmd, cwd, tickd, variables=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith('TICKD_')}
    env.update({v: 'docs-test-value' for v in variables})
    env.update(PATH=str(pathlib.Path(tickd).parent) + os.pathsep + env.get('PATH', ''),
               TZ='UTC', NO_COLOR='1', LC_ALL='C.UTF-8')
    p = subprocess.run(['bash', '-c', cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode('utf-8', 'replace')


def check_yaml(b, scratch, tickd, failures):
    name = b.options.get('file', f'snippet-{b.line}.yaml')
    text = completed(b.text) if 'partial' in b.flags else b.text
    f = scratch / name
    f.write_text(text, encoding='utf-8')
    f.chmod(0o644)
    if 'fragment' in b.flags:
        return 'fragment'
    # A `${VAR}` without a default is set, as the host that runs the file would set it.
    variables = re.findall(r'\$\{([A-Za-z_][A-Za-z0-9_]*)\}', text)
    status, out = run(f'tickd validate -c {name}', scratch, tickd, variables)
    want = 2 if 'invalid' in b.flags else 0
    if status != want:
        failures.append(f'{b.where()}: this job file should {"be refused with exit 2" if want else "validate"}'
                        f' (mark it if it is not meant to: see tests/docs/docs_test.py);'
                        f' tickd validate exited {status}:\n' + indent(out))
    return 'validated'


COMMENT = re.compile(r'\s{2,}# .*$')


def check_run(b, scratch, tickd, failures):
    steps, cmd, expected = [], None, []
    for line in b.text.rstrip('\n').split('\n'):
        if line.startswith('$ '):
            if cmd is not None:
                steps.append((cmd, expected))
            cmd, expected = line[2:], []
        elif cmd is None:
            failures.append(f'{b.where()}: a run block starts with a `$ ` command line')
            return
        else:
            expected.append(COMMENT.sub('', line).rstrip())
    if cmd is not None:
        steps.append((cmd, expected))
    for cmd, expected in steps:
        want_status = 0
        if expected and re.fullmatch(r'\[exit \d+\]', expected[-1]):
            want_status = int(expected.pop()[6:-1])
        status, out = run(cmd, scratch, tickd)
        got = [l.rstrip() for l in out.rstrip('\n').split('\n')] if out.strip() else []
        if status != want_status or got != expected:
            failures.append(f'{b.where()}: `$ {cmd}` shows\n' + indent('\n'.join(expected)) +
                            f'\n  (exit {want_status}) but printed\n' + indent(out.rstrip('\n')) +
                            f'\n  (exit {status})')


def indent(text):
    return '\n'.join('    | ' + l for l in text.split('\n'))


def snippets(root, tickd):
    failures, counts = [], {}
    with tempfile.TemporaryDirectory(prefix='tickd-docs-') as tmp:
        for page in pages(root):
            scratch = pathlib.Path(tmp) / str(page.relative_to(root)).replace('/', '_')
            scratch.mkdir()
            page_blocks = list(blocks(page, root))
            # Job files first, so that a page's commands can use the files it shows.
            for b in page_blocks:
                if b.lang == 'yaml':
                    kind = check_yaml(b, scratch, tickd, failures)
                    counts[kind] = counts.get(kind, 0) + 1
            for b in page_blocks:
                shows_command = re.search(r'^\$ tickd\b', b.text, re.M)
                if 'run' in b.flags:
                    check_run(b, scratch, tickd, failures)
                    counts['run'] = counts.get('run', 0) + 1
                elif 'skip' in b.flags:
                    counts['skip'] = counts.get('skip', 0) + 1
                elif shows_command:
                    failures.append(f'{b.where()}: a block shows `$ tickd …`: mark it '
                                    '<!-- docs-test: run --> (checked) or <!-- docs-test: skip: why -->')
    print('snippets: ' + ', '.join(f'{v} {k}' for k, v in sorted(counts.items())))
    return failures


LINK = re.compile(r'(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def github_slug(heading):
    """The anchor GitHub gives a heading: rendered text, lower case, punctuation dropped."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)   # links: their text
    text = re.sub(r'<[^>]+>', '', text)                         # inline HTML
    text = text.replace('`', '').replace('*', '').strip().lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def anchors(path):
    seen, out = {}, set()
    in_code = False
    for line in path.read_text(encoding='utf-8').split('\n'):
        if FENCE.match(line):
            in_code = not in_code
            continue
        m = HEADING.match(line)
        if m and not in_code:
            slug = github_slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f'{slug}-{n}')
    return out


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, inline code blanked out."""
    in_code, fence = False, ''
    for no, line in enumerate(path.read_text(encoding='utf-8').split('\n'), 1):
        m = FENCE.match(line)
        if m and (not in_code or line.strip().startswith(fence)):
            in_code, fence = (not in_code), m.group(2)
            continue
        if not in_code:
            yield no, re.sub(r'`[^`]*`', '``', line)


def links(root):
    failures, checked = [], 0
    cache = {}
    linked_from_readme = set()
    for page in pages(root):
        for no, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r'^[a-z][a-z0-9+.-]*:', target):   # http:, mailto:, file:
                    continue
                checked += 1
                path_part, _, anchor = target.partition('#')
                dest = (page.parent / path_part).resolve() if path_part else page.resolve()
                where = f'{page.relative_to(root)}:{no}'
                if not dest.exists():
                    failures.append(f'{where}: link to {target}: no such file')
                    continue
                if page.name == 'README.md' and page.parent == root:
                    linked_from_readme.add(dest)
                if anchor and dest.suffix == '.md':
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        failures.append(f'{where}: link to {target}: no heading with that anchor'
                                        f' in {dest.relative_to(root)}')
    for guide in sorted((root / 'docs').glob('*.md')):
        if guide.resolve() not in linked_from_readme:
            failures.append(f'README.md: the manual\'s map does not link {guide.relative_to(root)}')
    print(f'links: {checked} relative links checked')
    return failures


def cli_surface(tickd):
    """{subcommand: [options]} as CLI11 prints them in --help (hidden subcommands are not)."""
    def help_of(*args):
        return subprocess.run([tickd, *args, '--help'], stdout=subprocess.PIPE, check=True,
                              timeout=30).stdout.decode()
    text = help_of()
    subs = re.findall(r'^  ([a-z][a-z-]*)\s', text.split('Subcommands:', 1)[1], re.M)
    surface = {'': ['--help', '--version']}
    for sub in subs:
        options = []
        for line in help_of(sub).split('\n'):
            m = re.match(r'^  (-[^\s]+)', line)
            if m:
                options += m.group(1).split(',')
        surface[sub] = options
    return surface


def man(root, tickd, man_dir):
    failures = []
    page = (root / 'docs/man/tickd.1.scd').read_text(encoding='utf-8')
    surface = cli_surface(tickd)
    for sub, options in surface.items():
        if sub and not re.search(r'^\*' + re.escape(sub) + r'\*$', page, re.M):
            failures.append(f'docs/man/tickd.1.scd: no COMMANDS entry *{sub}* for `tickd {sub}`')
        for opt in options:
            if not re.search(r'\*' + re.escape(opt) + r'\*', page):
                failures.append(f'docs/man/tickd.1.scd: `tickd {sub} {opt}` is not described'
                                f' (write *{opt}* in OPTIONS)')
    yaml_page = (root / 'docs/man/tickd.yaml.5.scd').read_text(encoding='utf-8')
    source = (root / 'config/config.cc').read_text(encoding='utf-8')
    keys = set()
    for table in re.findall(r'k\w*Keys\[\]\s*=\s*\{(.*?)\};', source, re.S):
        keys.update(re.findall(r'"([a-z_]+)"', table))
    if len(keys) < 30:
        failures.append(f'config/config.cc: found only {len(keys)} job-file keys; has the loader\'s'
                        ' key tables changed shape? (this test reads k…Keys[] = {…})')
    for key in sorted(keys):
        if not re.search(r'(?<![a-z_])' + re.escape(key) + r'(?![a-z_])', yaml_page):
            failures.append(f'docs/man/tickd.yaml.5.scd: the job-file key `{key}` is not described')
    for name in ['tickd.1.gz', 'tickd.yaml.5.gz']:
        path = pathlib.Path(man_dir) / name
        if not path.exists():
            failures.append(f'{path}: not built')
            continue
        p = subprocess.run(['man', '-l', str(path)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60,
                           env=dict(os.environ, MANWIDTH='80', LC_ALL='C.UTF-8'))
        out, err = p.stdout.decode(errors='replace'), p.stderr.decode(errors='replace')
        out = re.sub('.\b', '', out)   # the overstrike of bold and underline
        if p.returncode != 0 or 'NAME' not in out or 'DESCRIPTION' not in out or err.strip():
            failures.append(f'{path}: man -l exited {p.returncode}:\n' + indent((err or out)[:2000]))
    print(f'man: {sum(len(o) for o in surface.values())} options of {len(surface) - 1} subcommands,'
          f' {len(keys)} job-file keys')
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('what', choices=['snippets', 'links', 'man'])
    ap.add_argument('--root', required=True, type=pathlib.Path)
    ap.add_argument('--tickd')
    ap.add_argument('--man-dir')
    args = ap.parse_args()
    root = args.root.resolve()
    if args.what == 'snippets':
        if not args.tickd:
            ap.error('snippets needs --tickd')
        failures = snippets(root, os.path.abspath(args.tickd))
    elif args.what == 'man':
        if not args.tickd or not args.man_dir:
            ap.error('man needs --tickd and --man-dir')
        failures = man(root, os.path.abspath(args.tickd), args.man_dir)
    else:
        failures = links(root)
    for f in failures:
        print('FAIL ' + f)
    print(f'{len(failures)} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
