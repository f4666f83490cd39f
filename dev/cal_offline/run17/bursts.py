"""Shared by the run 17 readers: the bursts of a call's folder and when a run counts as stalled."""
import glob, os, re, sys, collections

def args():
    """DIR [r_B_per_ns o_ns] from the command line (defaults: the profiles of run 17)."""
    d = sys.argv[1]
    r = float(sys.argv[2]) if len(sys.argv) > 2 else 53.2
    o = float(sys.argv[3]) if len(sys.argv) > 3 else 159.0
    return d, r, o

def load(d):
    """{K: {bytes per producer: [every run's total, ns]}} from DIR/kp_K_B.csv (replay --placement)."""
    runs = collections.defaultdict(dict)
    for f in glob.glob(os.path.join(d, 'kp_*_*.csv')):
        k, b = map(int, re.findall(r'kp_(\d+)_(\d+)\.csv', f)[0])
        runs[k][b] = [float(l.split(',')[1]) for l in open(f) if l[0].isdigit()]
    return runs

def share_stalled(totals, b, r, o):
    """The share of runs over 1.5 times the unconstrained issue time o + B/r, plus 1 us."""
    return sum(x > 1.5 * (o + b / r) + 1000 for x in totals) / len(totals)
