/**
 * Line charts of a benchmark's samples as SVG files, drawn by Apache ECharts' server-side
 * renderer (no browser, no canvas).
 */
import { writeFile } from 'node:fs/promises';
import * as echarts from 'echarts';

/** One line: its name and one value per x (null: no value there). */
export interface Line {
  name: string;
  values: Array<number | null>;
  /** Draw it against the right-hand axis. */
  right?: boolean;
}

/** A chart: a title, the x values, the lines and the names of the axes. */
export interface Chart {
  title: string;
  x: number[];
  xName: string;
  yName: string;
  /** The right-hand axis's name, when a line uses it. */
  rightName?: string;
  lines: Line[];
}

/** Writes `chart` as an SVG file at `path`. */
export async function writeChart(path: string, chart: Chart): Promise<void> {
  const plot = echarts.init(null, null, { renderer: 'svg', ssr: true, width: 960, height: 420 });
  try {
    plot.setOption({
      animation: false,
      backgroundColor: '#ffffff',
      title: { text: chart.title, left: 'center', textStyle: { fontSize: 15 } },
      legend: { top: 28 },
      grid: { top: 70, left: 70, right: chart.rightName === undefined ? 30 : 80, bottom: 50 },
      xAxis: { type: 'value', name: chart.xName, nameLocation: 'middle', nameGap: 28, min: 'dataMin', max: 'dataMax' },
      yAxis: [
        { type: 'value', name: chart.yName, nameLocation: 'middle', nameGap: 50, scale: false },
        ...(chart.rightName === undefined ? [] : [{ type: 'value', name: chart.rightName, nameLocation: 'middle', nameGap: 55, splitLine: { show: false } }]),
      ],
      series: chart.lines.map((line) => ({
        name: line.name,
        type: 'line',
        showSymbol: false,
        yAxisIndex: line.right === true ? 1 : 0,
        data: chart.x.map((x, i) => [x, line.values[i]]),
      })),
    });
    await writeFile(path, plot.renderToSVGString());
  } finally {
    plot.dispose();
  }
}
