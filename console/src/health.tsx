/**
 * The account's health over the last minutes: the ingest queue and how fast it drains, read
 * requests a second and their p99 per tool (from this service node's own record of its reads,
 * GET /v1/status), and in cluster mode the nodes. The charts are uPlot's, loaded with this page
 * only, so the first page stays small.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type uPlot from 'uplot';
import { json, type Status } from './api';
import { time } from './format';
import { usePoll } from './route';
import { ErrorLine, TableBox } from './ui';

/** Tool colours, distinguishable and at least 3:1 against the white chart. */
const COLOURS = ['#0b5cad', '#b3261e', '#1b7f3b', '#8a4b00', '#6b3fa0', '#00707a'];

interface Series {
  label: string;
  values: (number | null)[];
}

export function HealthPage() {
  const [status, setStatus] = useState<Status | null>(null);
  const [queue, setQueue] = useState<{ at: number; pending: number }[]>([]);
  const [error, setError] = useState('');

  usePoll(
    async () => {
      try {
        const s = await json<Status>('GET', '/v1/status');
        setStatus(s);
        setQueue((q) => [...q, { at: Date.now() / 1000, pending: s.ingest.pending }].slice(-360));
        setError('');
      } catch (e) {
        setError((e as Error).message);
      }
    },
    5000,
    [],
  );

  if (status === null) return error === '' ? <p class="muted">Loading…</p> : <ErrorLine error={error} />;
  const slots = status.reads.slots;
  const readTimes = slots.map((s) => Date.parse(s.at) / 1000);
  const tools = [...new Set(slots.flatMap((s) => Object.keys(s.tools)))].sort();
  const per = status.reads.slotSeconds;
  const rate: Series[] = tools.map((t) => ({ label: t, values: slots.map((s) => (s.tools[t]?.count ?? 0) / per) }));
  const p99: Series[] = tools.map((t) => ({ label: t, values: slots.map((s) => s.tools[t]?.p99Ms ?? null) }));
  const finished = status.ingest.finished;
  const finishedTimes = finished.map((f) => Date.parse(f.at) / 1000);
  return (
    <section aria-labelledby="health-title">
      <h1 id="health-title">Health</h1>
      <ErrorLine error={error} />
      <p>
        Ingest queue: <strong>{status.ingest.pending}</strong> files pending
        {status.ingest.pending > 0 ? `, the oldest for ${Math.round(status.ingest.oldestPendingSeconds)} s` : ''}.
      </p>
      <div class="charts">
        <Chart
          title="Ingest queue (files pending)"
          times={queue.map((q) => q.at)}
          series={[{ label: 'pending', values: queue.map((q) => q.pending) }]}
          empty="Sampled every 5 s while this page is open."
        />
        <Chart
          title="Ingest rate (files finished per second)"
          times={finishedTimes}
          series={[
            { label: 'ready', values: finished.map((f) => f.ready / per) },
            { label: 'error', values: finished.map((f) => f.error / per) },
          ]}
        />
        <Chart title="Read requests per second, by tool" times={readTimes} series={rate} empty="No read in the last minutes." />
        <Chart title="Read p99 latency (ms), by tool" times={readTimes} series={p99} empty="No read in the last minutes." />
      </div>
      {status.nodes.length > 0 && (
        <>
          <h2>Nodes</h2>
          <TableBox label="Nodes">
            <table>
              <thead>
                <tr>
                  <th scope="col">Node</th>
                  <th scope="col">State</th>
                  <th scope="col">Heartbeat</th>
                  <th scope="col" class="num">
                    Copies
                  </th>
                  <th scope="col" class="num">
                    Versions behind
                  </th>
                </tr>
              </thead>
              <tbody>
                {status.nodes.map((n) => (
                  <tr key={n.id}>
                    <th scope="row">{n.id}</th>
                    <td class={n.alive ? undefined : 'bad'}>{n.alive ? n.state : `${n.state} (not heard from)`}</td>
                    <td>{time(n.seenAt)}</td>
                    <td class="num">{n.copies}</td>
                    <td class="num">{n.versionsBehind}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
        </>
      )}
    </section>
  );
}

/** One line chart; a table of the same numbers is there for screen readers. */
function Chart({ title, times, series, empty }: { title: string; times: number[]; series: Series[]; empty?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label).join(',');
  const hasData = times.length > 1 && series.length > 0;

  useEffect(() => {
    if (!hasData) return;
    let gone = false;
    void Promise.all([import('uplot'), import('uplot/dist/uPlot.min.css')]).then(([{ default: UPlot }]) => {
      if (gone || box.current === null) return;
      plot.current?.destroy();
      const width = Math.max(280, box.current.clientWidth);
      plot.current = new UPlot(
        {
          width,
          height: 200,
          legend: { show: true },
          series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: false }))],
          axes: [{}, { size: 50 }],
        },
        [times, ...series.map((s) => s.values)],
        box.current,
      );
    });
    return () => {
      gone = true;
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape, hasData]);

  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)]);
  });

  const latest = series.map((s) => `${s.label} ${fmt(s.values.at(-1) ?? null)}`).join(', ');
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      {hasData ? <div ref={box} role="img" aria-label={`${title}: latest ${latest}`} /> : <p class="muted">{empty ?? 'No data yet.'}</p>}
    </figure>
  );
}

function fmt(v: number | null): string {
  return v === null ? 'none' : Number.isInteger(v) ? String(v) : v.toFixed(2);
}
