function applyFilter(){
  const on=new Set([...document.querySelectorAll('#filters input[type=checkbox]:checked')].map(i=>i.value));
  const area=document.getElementById('area').value;
  const rule=document.getElementById('rule').value.trim().toUpperCase();
  const words=document.getElementById('search').value.trim().toLowerCase();
  let shown=0;
  document.querySelectorAll('.scenario').forEach(s=>{
    const ok=on.has(s.dataset.status)&&(!area||s.dataset.area===area)
      &&(!rule||(' '+s.dataset.rules+' ').includes(' '+rule+' '))
      &&(!words||s.textContent.toLowerCase().includes(words));
    s.hidden=!ok; if(ok) shown++;
  });
  document.getElementById('shown').textContent=shown;
}
document.querySelectorAll('#filters input,#filters select').forEach(i=>{
  i.addEventListener('input',applyFilter); i.addEventListener('change',applyFilter);});
window.addEventListener('hashchange',()=>{const t=document.getElementById(location.hash.slice(1));
  if(t&&t.hidden){t.hidden=false;} if(t) t.scrollIntoView();});
applyFilter();
